#!/usr/bin/env bash
# Ready (a 4-GPU kind): two slices a step at any W (lab/wip/exchange-two-up-any-w.patch, wheel w4up-ext): the pushes
# and the all-gather / all-to-all receives take two slices a step at W = 4 too; the reduce-scatter's sums stay one
# slice a step past W = 2 (two spilled 74-98 bytes in every codec kernel). On 2x H200 two slices a step made int4 /
# int4h 11-20% faster at 32-512 MB, fp8 4-10% (2026-11-28, calls bf / bh). Correct on one shared GPU at W = 4 and
# W = 8 (call bk: large segments 100, uneven 54, mixed CTA 73, dynamic 1542 at W = 4: 0 failed).
# Expectation at W = 4: codecs 5-15% faster at 32-512 MB (less than at W = 2: the reduce-scatter's receive keeps one
# slice a step), 2-8 MB even. Land the patch if nothing loses more than 3%; then lab/calls/next-w4-coded-rs.sh.
# Wheels: .wheels/main-ext (main's C++ at 3cf7e0d, 2026-11-28's eighth sitting), .wheels/w4up-ext (3cf7e0d + the patch). Carry both.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use w4up-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=large_segments_vs_twin,collectives_vs_twin,uneven_all_to_all,mixed_cta_all_to_all,collective_graph_replays \
  timeout 200 python3 -m pytest -q -s tests/gpu/test_collectives.py -p no:cacheprovider > $OUT/tests-w4up.log 2>&1
echo "tests w4up W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w4up.log | tail -6
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=dynamic_vs_host_sized timeout 100 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py \
  -p no:cacheprovider >> $OUT/tests-w4up.log 2>&1
echo "tests w4up dynamic: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-w4up.log | tail -2
for v in main w4up main w4up; do
  use $v-ext > /dev/null
  DEV_SIZES=2,8,32,128,512 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int4,int4h DEV_THREADS=0 timeout 120 \
    python3 lab/scripts/dev_exchange.py > /tmp/dx.log 2>&1
  echo "dev_exchange W=$gpus $v: exit $? [$SECONDS s]"; sed "s/^/$v /" /tmp/dx.log >> $OUT/dev-exchange.log
done
python3 lab/scripts/ab_dev_exchange.py $OUT/dev-exchange.log
moe_ab a2a $OUT/a2a-ab.csv 80 main w4up --iters 20 --a2a-sizes 8K,128K,2M,8M,32M
ab_a2a $OUT/a2a-ab.csv main w4up
