#!/usr/bin/env bash
# Ran once (2026-11-28 call bd, before two slices a step: push ~50%, decode ~47%, wait ~1-4% of every CTA's call).
# Ready again (2 or 4 GPUs) with timers-ext rebuilt from main after two slices a step (the seventh sitting):
# where the coded exchange's time goes at 128 / 512 MB (issue 39's int4 and fp8 misses): the
# ExchangeTimers laps (push = encode + staging, wait = sources' flags, decode, announce = this CTA's bulk copies
# landing) of CTA 0 and the last CTA, bf16 / fp8 / int4, each collective. Wheel timers-ext (main at the laps' commit
# built with QR_PHASE_TIMERS=1: slower, never benchmark it). Reading: if announce dominates, the CTA waits on the
# link with nothing else to do (overlap across CTAs is the lever: warp-specialised steps or more CTAs); if push or
# decode dominate, the codec's arithmetic / HBM is (fewer instructions, wider loads).
# Then (wheel main-ext) the CTA size at 128 / 512 MB: the rule's, 256 and 512 threads (a 256-thread CTA leaves room
# for four an SM: more steps in flight to overlap a CTA's encode with another's copies).
# Carry .wheels/timers-ext .wheels/main-ext
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
use timers-ext > /dev/null
timeout 200 python3 lab/scripts/exchange_laps.py > $OUT/laps-w$gpus.log 2>&1
echo "laps W=$gpus: exit $? [$SECONDS s]"; grep -A$((2 * gpus)) -E "^--- .* call 2" $OUT/laps-w$gpus.log | grep -E "^---|rank 0 " | cut -c1-400
if [ $gpus -gt 2 ]; then
  CUDA_VISIBLE_DEVICES=0,1 timeout 150 python3 lab/scripts/exchange_laps.py > $OUT/laps-w2.log 2>&1
  echo "laps W=2: exit $? [$SECONDS s]"; grep -A4 -E "^--- .* call 2" $OUT/laps-w2.log | grep -E "^---|rank 0 " | cut -c1-400
fi
use main-ext > /dev/null
DEV_SIZES=128,512 DEV_KINDS=rs,ag,a2a DEV_CODECS=fp16,fp8,int4 DEV_THREADS=0,256,512 timeout 150 python3 lab/scripts/dev_exchange.py \
  > $OUT/threads-w$gpus.log 2>&1
echo "threads W=$gpus: exit $? [$SECONDS s]"; cat $OUT/threads-w$gpus.log
