#!/usr/bin/env bash
# Session 20 call 11 (2 GPUs): `bench --gap` (a one-element kernel between every two calls, its time alone
# subtracted) against the usual back-to-back bench, same machine, every small-message peer.
set -uo pipefail
DEVICE_LOG=call11.log source lab/scripts/device_lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
use head
peers
M=nccl,nccl_copy,symm_mem_one_shot,symm_mem_two_shot,vllm_custom,trtllm_one_shot,trtllm_one_shot_pdl,qr_one_shot,qr_two_shot,qr_auto
for form in gap plain gap; do
  extra=""; [ $form = gap ] && extra=--gap
  timeout 80 python3 -m quickreduce.cli bench $extra --timeout 75 --replays 9 --methods $M --sizes 8K:8M:2 --dtype bf16 \
    --csv /tmp/b.csv >> $L 2>&1
  echo "bench $form: exit $?"
  [ -f $OUT/gap.csv ] || sed -n 1p /tmp/b.csv | sed 's/^/form,/' > $OUT/gap.csv
  sed 1d /tmp/b.csv | sed "s/^/$form,/" >> $OUT/gap.csv
done
grep -m2 "gap:" $L
ab_rows $OUT/gap.csv form | tee -a $L | head -120
bash scripts/gpu_check.sh fold > /dev/null
