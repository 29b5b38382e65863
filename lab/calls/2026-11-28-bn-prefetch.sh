#!/usr/bin/env bash
# 2x H200. grule2-ext = main + explicit exchange groups + the W = 2 input-bytes groups rule restricted to the
# coded reduce-scatter and fp32 all-gather (call bm measured it wider); pf-ext = that + lane 0 of each CTA
# prefetching the input of its next slices (a pass ahead, within its share) into L2 by the bulk-copy unit
# (cp.async.bulk.prefetch.L2): the push's loads (all kinds) and the reduce-scatter's own values.
# Expectation: pf 10-25% faster for the codecs at 32-512 MB if the lanes' loads wait on HBM latency (the laps: push
# and decode ~95% of a CTA's time); passthrough 0-5%; 8 MB even. Risk: L2 thrash (528 CTAs x 8-16 KB ahead = 4-8 MB).
# Carry .wheels/grule2-ext .wheels/pf-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use pf-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=large_segments_vs_twin,collectives_vs_twin,uneven_all_to_all,mixed_cta_all_to_all,coded_small_segments,collective_graph_replays \
  timeout 150 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-pf.log 2>&1
echo "tests pf: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-pf.log | tail -8
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=dynamic_vs_host_sized timeout 60 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py \
  -p no:cacheprovider >> $OUT/tests-pf.log 2>&1
echo "tests pf dynamic: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-pf.log | tail -2
for v in grule2 pf grule2 pf; do
  use $v-ext > /dev/null
  for dt in bf16 fp32; do
    DEV_DTYPE=$dt DEV_SIZES=8,32,128,512 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int4,int4h DEV_THREADS=0 \
      timeout 90 python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
    echo "dev_exchange $dt $v: exit $? [$SECONDS s]"; sed "s/^/$dt $v /" /tmp/dx.log >> $OUT/ab.log
  done
done
python3 lab/scripts/ab_dev_exchange.py $OUT/ab.log 2 | grep -v " nccl "
