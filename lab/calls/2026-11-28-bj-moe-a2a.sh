#!/usr/bin/env bash
# 2x H200. The MoE all-to-all (dynamic and host-sized: sizes cross, 256-thread CTAs below 16 MB a rank, so two slices
# a step apply at W = 2) with final-ext (main + two slices a step) against main-ext (88b1e31: one slice a step),
# `bench moe --part a2a`, A B A B. Expectation: 8 KB-2 MB even (a CTA rarely holds two slices), 8-128 MB 5-15% faster.
# Carry .wheels/main-ext .wheels/final-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
moe_ab a2a $OUT/a2a-ab.csv 80 main final --iters 20 --a2a-sizes 8K,128K,2M,8M,32M,128M
ab_a2a $OUT/a2a-ab.csv main final
