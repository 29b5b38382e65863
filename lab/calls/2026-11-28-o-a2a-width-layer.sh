#!/usr/bin/env bash
# 4x H100 (2026-11-28): is 512-thread CTAs' 3-6 us at 32 KB-2 MB a back-to-back cost (PDL: the next call's
# 512-thread CTAs cannot sit beside the running call's, whose two CTAs an SM fill the register file)? The a2a part
# with QUICKREDUCE_PDL=0, main against a2aw, A B A B; then what a user sees: the MoE layer (one dynamic dispatch and
# combine among other kernels), main against a2aw, A B A B, 32-16384 tokens.
# Expectation: with PDL off the small-size gap shrinks to <1 us; the layer equal at 32-256 tokens, 2-5% faster at 16384.
# Carry .wheels/main-ext, .wheels/a2aw-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu x $(nvidia-smi -L | wc -l)"
QUICKREDUCE_PDL=0 moe_ab a2a $OUT/a2a-nopdl-ab.csv 45 main a2aw --iters 20
ab_a2a $OUT/a2a-nopdl-ab.csv main a2aw
moe_ab layer $OUT/layer-ab.csv 80 main a2aw --tokens 32,256,4096,16384 --iters 10
ab_layer $OUT/layer-ab.csv main a2aw
