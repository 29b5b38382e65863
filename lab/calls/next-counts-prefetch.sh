#!/usr/bin/env bash
# Ready, NEVER GPU-RUN (2 GPUs, ask nvidia-h200-x2; 4 also tells): the dynamic all-to-all's counts prefetched into L2
# before griddepcontrol.wait (lab/wip/dynamic-counts-prefetch.patch, 4 lines in exchange.cuh; wheel .wheels/cpref-ext
# built 2026-11-28 from main + the patch). Why: issue 43's last miss is the dynamic call's fixed cost on H200's
# 12 us calls (2x H200, older kernel: 1.06-1.15x the host-sized call at 8-128 KB); the exchange timers put most
# of it in the count loads every CTA makes cold after the wait (~2300 cycles of CTA 0, W = 2, H100).
# Expectation: dynamic -0.3..-0.8 us at 8 KB-2 MB a rank, host-sized unchanged, large sizes unchanged.
# A B A B (wheels main-ext, cpref-ext) of `bench moe --part a2a`, then the dynamic tests on cpref. Carry .wheels/main-ext,
# .wheels/cpref-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
moe_ab a2a $OUT/a2a-ab.csv 45 main cpref --iters 20 --a2a-sizes 8K,32K,128K,512K,2M,8M,32M
ab_a2a $OUT/a2a-ab.csv main cpref
use cpref-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_DYNAMIC_REPLAYS=300 QR_TEST_SCENARIOS=dynamic_vs_host_sized,dynamic_graph_replays,dynamic_bad_counts \
  timeout 150 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests.log | tail -6
