#!/usr/bin/env bash
# Session 20 call 12 (2 GPUs): `bench --gap` with our kernels' PDL on and off (QUICKREDUCE_PDL), beside
# TensorRT-LLM's one-shot without and with PDL: is our one-shot's own latency behind TensorRT-LLM's once
# no launch overlaps (call 11: 2.99 against 2.90 us at 8K with a kernel between calls)?
set -uo pipefail
DEVICE_LOG=call12.log source lab/scripts/device_lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
use head
peers
for form in pdl1 pdl0 pdl1 pdl0; do
  QUICKREDUCE_PDL=${form#pdl} timeout 40 python3 -m quickreduce.cli bench --gap --timeout 35 --replays 9 \
    --methods trtllm_one_shot,trtllm_one_shot_pdl,qr_one_shot --sizes 8K:1M:2 --dtype bf16 --csv /tmp/b.csv >> $L 2>&1
  echo "bench $form: exit $?"
  [ -f $OUT/pdl.csv ] || sed -n 1p /tmp/b.csv | sed 's/^/form,/' > $OUT/pdl.csv
  sed 1d /tmp/b.csv | sed "s/^/$form,/" >> $OUT/pdl.csv
done
ab_rows $OUT/pdl.csv form | tee -a $L
bash scripts/gpu_check.sh fold > /dev/null
