#!/usr/bin/env bash
# 2 or 4 GPUs (run 2026-11-27 on 2x H200, wheel timers = main with QR_PHASE_TIMERS=1): where the dynamic all-to-all's ~2.5 us over the host-sized call
# goes at 8-512 KB (issue 43's 1.1x target; lab/NOTES.md "Session 22", call 6). Build here first:
#   WHEEL_ROOT=$PWD/.wheels bash lab/scripts/build_variant.sh timers QR_PHASE_TIMERS=1 && bash lab/scripts/engine_gpu_check.sh pack timers
# Carry .wheels/timers-ext. Never benchmark this wheel (the timers slow every kernel they are in).
set -uo pipefail
DEVICE_LOG=timers.log source lab/scripts/device_lib.sh
use timers-ext
timeout 120 python3 lab/scripts/exchange_timers.py > $OUT/exchange-timers.log 2>&1
echo "exchange timers W=$(nvidia-smi -L | wc -l): exit $?"
grep -E "^---|exchange_timers rank 0" $OUT/exchange-timers.log | head -40
