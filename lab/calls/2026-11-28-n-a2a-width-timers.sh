#!/usr/bin/env bash
# 4x H100 (2026-11-28): where 512-thread CTAs lose 3-6 us against 256 at 32 KB-2 MB a rank in the all-to-all, with
# the same slices (call l). Exchange timers (CTA 0 and the last CTA: phases in cycles, start and length in ns), the
# skewed shape, host-sized and dynamic, main (256) against a2aw (512, 256-wide slices when small). Timer wheels only,
# never benchmarked. Carry .wheels/timers-ext, .wheels/a2awtimers-ext.
set -uo pipefail
DEVICE_LOG=timers.log source lab/scripts/device_lib.sh
SECONDS=0
for v in timers a2awtimers; do
  use $v-ext > /dev/null
  ET_BYTES=32768,524288,33554432 timeout 100 python3 lab/scripts/exchange_timers.py > $OUT/timers-$v.log 2>&1
  echo "=== $v: exit $? [$SECONDS s]"
  grep -E "^---.*call 2|exchange_timers rank 0" $OUT/timers-$v.log | awk '/^---/{p=/call 2/} p' | head -24
done
