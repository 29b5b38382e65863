#!/usr/bin/env bash
# Session 20 call 13 (2 GPUs): QUICKREDUCE_PDL on / off in `quickreduce e2e` decode (a real layer's GEMMs between
# the all-reduces): call 12 had our one-shot ~0.2 us faster without PDL once a kernel sits between calls.
set -uo pipefail
DEVICE_LOG=call13.log source lab/scripts/device_lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
use head
peers
for form in pdl1 pdl0 pdl1; do
  QUICKREDUCE_PDL=${form#pdl} timeout 55 python3 -m quickreduce.cli e2e --model llama3-8b --layers 4 --providers qr_auto,trtllm_one_shot \
    --prefill 1024 --batches 1,16,64 --iters 10 --no-check --no-plot --timeout 50 --csv /tmp/e.csv >> $L 2>&1
  echo "e2e $form: exit $?"
  [ -f $OUT/e2e-pdl.csv ] || sed -n 1p /tmp/e.csv | sed 's/^/form,/' > $OUT/e2e-pdl.csv
  sed 1d /tmp/e.csv | sed "s/^/$form,/" >> $OUT/e2e-pdl.csv
done
cat $OUT/e2e-pdl.csv | cut -c1-200 | head -40
bash scripts/gpu_check.sh fold > /dev/null
