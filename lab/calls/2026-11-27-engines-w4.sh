#!/usr/bin/env bash
# 2026-11-27, 4 GPUs: the engine plugins at TP = 4 (tests/gpu/test_engines_gpu.py through
# lab/scripts/engine_gpu_check.sh, every codec start), then racecheck over the dynamic all-to-all's bad-count
# and graph scenarios at W = 2 on two of the GPUs. Carry .engine-kit and .wheels/main1-ext.
set -uo pipefail
ENGINE_CHECK_TIMEOUT_S=${ENGINE_CHECK_TIMEOUT_S:-150} bash lab/scripts/engine_gpu_check.sh 4 main1-ext
tail -c 3000 $OUT/engines-w4.log
source lab/scripts/device_lib.sh   # the extension is in python/ already (engine_gpu_check used it)
CUDA_VISIBLE_DEVICES=0,1 QR_TEST_WORLD_SIZE=2 QR_TEST_SCENARIOS=dynamic_bad_counts,dynamic_graph_replays QR_DYNAMIC_REPLAYS=20 \
  timeout 80 compute-sanitizer --tool racecheck --target-processes all --report-api-errors no python3 -m pytest -q -s \
  tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > /tmp/racecheck.log 2>&1
echo "racecheck dynamic W=2: exit $? $(grep -c 'RACECHECK SUMMARY: 0 hazards' /tmp/racecheck.log) clean summaries"
grep -m8 -E "SUMMARY|hazard|passed|failed|checks" /tmp/racecheck.log
