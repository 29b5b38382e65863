#!/usr/bin/env bash
# 2x H200 (no 4-GPU kind lent): where the coded exchange's time goes at 128 / 512 MB (issue 39's int4 and fp8 misses
# at W = 2), as lab/calls/next-exchange-laps.sh (laps with the timers wheel; CTA size 0 = rule, 256, 512 with main),
# plus each codec's encode / decode speed on one GPU (no link) for the HBM side of the bound.
# Carry .wheels/timers-ext .wheels/main-ext
set -uo pipefail
bash lab/calls/next-exchange-laps.sh
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
use main-ext > /dev/null
speed main --codecs fp8,int4,int4h
