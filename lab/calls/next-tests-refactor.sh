#!/usr/bin/env bash
# Ready for the next session (never run: no device time left), 2 GPUs: tests/gpu/test_collectives.py after its exact references became one rank_order_sum().
# Build and pack a wheel of main as s23d (lab/scripts/build_variant.sh, engine_gpu_check.sh pack); carry .wheels/s23d-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
use s23d-ext > /dev/null
QR_TEST_WORLD_SIZE=2 QR_COLLECTIVE_REPLAYS=300 timeout 130 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w2.log 2>&1
echo "collective tests W=2: exit $?"; grep -E "checks|passed|failed|FAIL" $OUT/tests-w2.log | tail -14
