#!/usr/bin/env bash
# 2026-11-27 (second sitting), 4 GPUs, wheel s22a (main at the call): the engine plugins at TP = 4 with every
# codec start (FP, LOSSLESS, INT8, FP8, INT4); racecheck over the dynamic all-to-all's bad counts and graph
# replays at W = 2; the dynamic all-to-all tests at W = 8 on one shared GPU; tests/gpu at 4 ranks.
# Carry .engine-kit and .wheels/s22a-ext.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$SECONDS
ENGINE_CHECK_TIMEOUT_S=240 bash lab/scripts/engine_gpu_check.sh 4 s22a-ext
echo "engines took $((SECONDS - t0)) s"
source lab/scripts/device_lib.sh   # the extension is in python/ already (engine_gpu_check put it there)
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
t0=$SECONDS
CUDA_VISIBLE_DEVICES=0,1 QR_TEST_WORLD_SIZE=2 QR_TEST_SCENARIOS=dynamic_bad_counts,dynamic_graph_replays QR_DYNAMIC_REPLAYS=20 \
  timeout 150 compute-sanitizer --tool racecheck --target-processes all --report-api-errors no python3 -m pytest -q -s \
  tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/racecheck.log 2>&1
echo "racecheck dynamic W=2: exit $? $(grep -c 'RACECHECK SUMMARY: 0 hazards' $OUT/racecheck.log) clean summaries, $((SECONDS - t0)) s"
grep -m12 -E "SUMMARY|hazard|passed|failed|checks" $OUT/racecheck.log
t0=$SECONDS
CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 timeout 200 python3 -m pytest -q -s \
  tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/dynamic-w8-shared.log 2>&1
echo "dynamic W=8 shared: exit $?, $((SECONDS - t0)) s"; tail -5 $OUT/dynamic-w8-shared.log
t0=$SECONDS
QR_TEST_WORLD_SIZE=4 timeout 240 python3 -m pytest -q tests/gpu -p no:cacheprovider > $OUT/tests-gpu-w4.log 2>&1
echo "tests/gpu W=4: exit $?, $((SECONDS - t0)) s"; tail -5 $OUT/tests-gpu-w4.log
bash scripts/gpu_check.sh fold 2>/dev/null || (cd $OUT && for f in *.log; do echo "===== $f"; cat "$f"; done > /tmp/l && rm -f *.log && mv /tmp/l all-logs.log)
ls $OUT
