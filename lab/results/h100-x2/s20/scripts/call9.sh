#!/usr/bin/env bash
# Session 20 call 9 (one GPU; every rank on it): lab/wip/two-shot-w4-defaults.patch
# (wheel `w4a`: 4 GPUs take CTAs of 512 from 64 tiles, groups counted per peer) is correct at 4 ranks:
# its new W = 4 layout against the CPU twin, with every rank on one shared GPU (results, not speed).
set -uo pipefail
DEVICE_LOG=call9.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
use w4a
python3 -c "import quickreduce._C as C; print('slice values W=4, 1M values:', C.two_shot_slice_values(1 << 20, 4))" | tee -a $L
QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=4 QR_TEST_SCENARIOS=passthrough_reference,codecs_vs_twin,graph_replays,epilogue_vs_oracle \
  timeout 300 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_dist.py tests/gpu/test_epilogue_gpu.py \
  > $OUT/shared-w4.log 2>&1
echo "shared W=4 (w4a): exit $? $(tail -1 $OUT/shared-w4.log) [$SECONDS s]"; grep -E "checks|FAILED" $OUT/shared-w4.log | head -8
bash scripts/gpu_check.sh fold > /dev/null
