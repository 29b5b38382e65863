#!/usr/bin/env bash
# 4 GPUs (asked nvidia-h100-x4, 2026-11-28), trimmed to the budget left (tests: the twin and uneven scenarios; the family at 32-512 MB, fp8 and int4): the segment exchange's push loading each input lane one
# item ahead (lab/wip/exchange-prefetch.patch, wheel .wheels/prefetch-ext built from main + the patch on
# 2026-11-27; the exchange then spills 16-36 bytes a thread in the 16-bit codec kernels, 80-96 in fp32 ones, at
# the 64-register cap of __launch_bounds__(512, 2)). Why: the family's codecs at >= 32 MB run at 33-60% of their
# byte bound, and a CTA of the slice path has one 16-byte input load in flight a thread (the two-shot's
# LaneFetcher, the same idea, made its 64 MB codecs 3-6% faster on 2x H200). Expectation: codecs at 32-512 MB
# 3-8% faster, exact calls unchanged. Tests first (the patch changes the push order's bookkeeping), then
# A B A B on the family.
# Carry .wheels/main-ext, .wheels/prefetch-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu"
gpus=$(nvidia-smi -L | wc -l)
use prefetch-ext > /dev/null
QR_TEST_WORLD_SIZE=$gpus QR_TEST_SCENARIOS=collectives_vs_twin,uneven_all_to_all QR_COLLECTIVE_REPLAYS=50 timeout 90 python3 -m pytest -q -s tests/gpu/test_collectives.py \
  -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests W=$gpus: exit $? [$SECONDS s]"; grep -E "checks|passed|failed|FAIL" $OUT/tests.log | tail -16
for v in main prefetch main prefetch; do
  use $v-ext > /dev/null
  timeout 45 python3 -m quickreduce.cli bench --no-multicast --gpus $gpus --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
    --methods qr_fp8,qr_int4 --sizes 32M:512M:4 --replays 9 --timeout 40 --csv /tmp/fam.csv > /tmp/fam.log 2>&1
  echo "family $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/fam.csv >> $OUT/family-ab.csv
done
ab_family $OUT/family-ab.csv main prefetch
