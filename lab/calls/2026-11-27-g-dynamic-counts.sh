#!/usr/bin/env bash
# 2026-11-27, 4 GPUs (asked as nvidia-h200-x4): the dynamic all-to-all reading its counts one a thread
# (s22c = 0e5f0c2) against the commit before it (s22b): dynamic / host-sized at 8-512 KB, alternated
# A B A B; on H200 then `quickreduce tune` (the h200-w4 table with rs_ag among the candidates); the
# dynamic tests at W = 4 on s22c with what time is left. Carry .wheels/s22b-ext, .wheels/s22c-ext.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $gpu"
for v in s22b-ext s22c-ext s22b-ext s22c-ext; do
  use $v
  timeout 40 python3 -m quickreduce.cli bench moe --no-multicast --part a2a --a2a-sizes 8K,32K,128K,512K --csv /tmp/a2a.csv >> $L 2>&1
  echo "a2a $v: exit $?"; sed 1d /tmp/a2a.csv | sed "s/^/$v,/" >> $OUT/a2a-ab.csv
done
cut -d, -f1,9,19-22 $OUT/a2a-ab.csv
case "$gpu" in
  *H200*)
    t0=$SECONDS
    timeout 100 python3 -m quickreduce.cli tune --no-multicast --gpus 4 --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16 \
      --sizes 8K:1G:2 --timeout 95 --out $OUT/tuned-w4.json --csv $OUT/tune-w4.csv --no-cache >> $L 2>&1
    echo "tune: exit $? [$((SECONDS - t0)) s]" ;;
esac
t0=$SECONDS
QR_TEST_WORLD_SIZE=4 QR_DYNAMIC_REPLAYS=200 timeout 60 python3 -m pytest -q -s tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider > $OUT/tests.log 2>&1
echo "dynamic tests W=4: exit $? [$((SECONDS - t0)) s]"; grep -E "checks|passed|failed" $OUT/tests.log | tail -8
