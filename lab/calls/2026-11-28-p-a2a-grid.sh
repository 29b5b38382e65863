#!/usr/bin/env bash
# 4x H100 (2026-11-28): the all-to-all whose sizes cross at 512 threads, ONE CTA an SM (wheel a2ag: a2aw's slice-width
# rule, the even all-to-all back at 256, the grid 132 x 512), so the next call's CTAs fit beside a running call's
# under PDL. Expectation: a2a part (PDL on) within 0.5 us of main at 8 KB-8 MB; >= 32 MB a rank 3-10% faster than
# main (between main and a2aw); the layer no slower than main at 32-256 tokens, 1-2% faster at 16384.
# Tests first (uneven and dynamic all-to-all at W = 4). Carry .wheels/main-ext, .wheels/a2ag-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu x $(nvidia-smi -L | wc -l)"
use a2ag-ext > /dev/null
QR_TEST_WORLD_SIZE=4 QR_TEST_SCENARIOS=uneven_all_to_all,dynamic_vs_host_sized,dynamic_graph_replays,dynamic_bad_counts \
  QR_DYNAMIC_REPLAYS=200 timeout 80 python3 -m pytest -q -s tests/gpu/test_collectives.py tests/gpu/test_all_to_all_dynamic_gpu.py \
  -p no:cacheprovider > $OUT/tests-w4.log 2>&1
echo "tests W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests-w4.log | tail -8
moe_ab a2a $OUT/a2a-ab.csv 40 main a2ag --iters 20
ab_a2a $OUT/a2a-ab.csv main a2ag
moe_ab layer $OUT/layer-ab.csv 50 main a2ag --tokens 32,256,16384 --iters 10
ab_layer $OUT/layer-ab.csv main a2ag
