#!/usr/bin/env bash
# Session 19 call 11 (2 GPUs): wheel `split` = the two-shot's residual-adding kernels moved to their own
# translation unit (dispatch_two_shot_residual.cu; host code only, the kernels are call 9's): the
# epilogue tests (both routes) and the codec scenarios on 2 GPUs.
set -uo pipefail
DEVICE_LOG=call11.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
use split
QR_TEST_SCENARIOS=epilogue_vs_oracle,epilogue_fp8,epilogue_in_place_and_graphs,codecs_vs_twin,graph_replays,collectives_vs_twin \
  timeout 200 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_epilogue_gpu.py tests/gpu/test_dist.py tests/gpu/test_collectives.py > $OUT/tests.log 2>&1
echo "tests: exit $? $(tail -1 $OUT/tests.log) [$SECONDS s]"; grep -E "checks|FAILED" $OUT/tests.log | head -8
bash scripts/gpu_check.sh fold > /dev/null
