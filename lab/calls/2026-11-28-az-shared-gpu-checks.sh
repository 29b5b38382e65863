#!/usr/bin/env bash
# One GPU (only nvidia-h200 lent): correctness on one shared GPU, never speed.
# 1. main (wheel main-ext, built from main at 55d6a2d): the coded reduce-scatter's LL-unit small path at W = 4
#    (twin, coded and exact small segments, graph replays) and its error paths (a peer that never arrives,
#    ranks that disagree), which had run on no GPU yet.
# 2. llall (lab/wip/coded-units-all-kinds.patch rebased on 55d6a2d): the all-gather / all-to-all coded small
#    path in LL units at W = 4, 8 and 2 (never GPU-run).
# Carry .wheels/main-ext .wheels/llall-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
shared() {  # shared W VARIANT SCENARIOS TIMEOUT
  use $2-ext > /dev/null
  CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=$1 QR_TEST_SCENARIOS=$3 \
    timeout $4 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-$2-w$1.log 2>&1
  echo "tests $2 W=$1 shared: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|Error" $OUT/tests-$2-w$1.log | tail -12
}
shared 4 main collective_peer_timeout,collective_mismatch,coded_small_segments,small_segments 170
shared 4 llall coded_small_segments,small_segments,collective_peer_timeout,collective_mismatch 150
shared 8 llall coded_small_segments 150
[ $SECONDS -lt 480 ] && shared 2 llall collectives_vs_twin,coded_small_segments 90
[ $SECONDS -lt 520 ] && shared 4 main collective_graph_replays 60
echo "done [$SECONDS s]"
