#!/usr/bin/env bash
# 4 GPUs (asked nvidia-h100-x4, 2026-11-28): the all-to-all whose sizes cross with CTA sizes chosen per
# rank (lab/wip/a2a-paired-ctas.patch, wheel .wheels/pair-ext built 2026-11-28 from main 7196daa + the patch).
# Slices are 256 lanes at any CTA size, so ranks may differ; a 512-thread CTA moves two slices at a time (one a
# half); each host picks 512 from 16 MB of its own bytes (host-sized: max(in, out); dynamic: max(in rows, capacity)).
# Why (lab/NOTES.md session 25, calls k-p): 264 x 512 threads move 32-256 MB a rank 4-13% faster than 264 x 256, but
# back-to-back small calls at 512 lose 3-6 us (no room for the next call's CTAs under PDL); the host cannot agree a
# size across ranks, so the protocol must not depend on the CTA size.
# Expectation: a2a part at 8 KB-8 MB = main (+-0.5 us); 32-256 MB as a2a512 (4-13% faster); the layer at 32-256 tokens
# = main, 4096-16384 1-2.4% faster (DeepSeek-V3 16384 uniform ahead of NCCL). Tests first: mixed_cta_all_to_all (every
# mix of 256/512 across ranks vs the twin), uneven, dynamic. Apply the patch before running (its tests are in it):
#   git apply lab/wip/a2a-paired-ctas.patch
# Carry .wheels/main-ext, .wheels/pair-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use pair-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=mixed_cta_all_to_all,uneven_all_to_all,collectives_vs_twin,dynamic_vs_host_sized,dynamic_graph_replays,dynamic_bad_counts \
  QR_DYNAMIC_REPLAYS=300 timeout 120 python3 -m pytest -q -s tests/gpu/test_collectives.py tests/gpu/test_all_to_all_dynamic_gpu.py \
  -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests.log | tail -10
grep -q " passed" $OUT/tests.log && ! grep -qE "[1-9][0-9]* failed" $OUT/tests.log || { echo "tests failed: no A/B"; exit 1; }
moe_ab a2a $OUT/a2a-ab.csv 40 main pair --iters 20
ab_a2a $OUT/a2a-ab.csv main pair
moe_ab layer $OUT/layer-ab.csv 60 main pair --tokens 32,256,4096,16384 --iters 10
ab_layer $OUT/layer-ab.csv main pair
