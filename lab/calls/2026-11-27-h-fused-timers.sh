#!/usr/bin/env bash
# 4 GPUs: (1) lab/wip/fused-rs-ag.patch against main, A/B alternated (expectation written before the run:
# rs_ag 2-5 us less at 1-8 MB: one launch, no inter-kernel gap); (2) the exchange timers (QR_PHASE_TIMERS
# wheel) for the dynamic all-to-all's small-size cost; (3) the patched tree's GPU tests at W = 4.
# Carry: .wheels/s22b-ext (main's C++), .wheels/fused-ext, .wheels/timers-ext, .snapA (main's Python),
# .snapB (patched Python), (no .peers: the carry limit; peers are in results/h100-x4/bench.csv).
set -uo pipefail
root=$PWD
SECONDS=0
run_in() {  # run_in SNAP WHEEL: the snapshot's Python with the wheel's extension
  cd "$root/$1" && ln -sfn "$root/.wheels" .wheels
  DEVICE_LOG=call.log source lab/scripts/device_lib.sh; use "$2" > /dev/null
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for i in 1 2; do
  (run_in .snapA s22b-ext; qb --methods qr_rs_ag,qr_two_shot --sizes 512K:16M:2 --csv $OUT/ab.main.$i.csv)
  (run_in .snapB fused-ext; qb --methods qr_rs_ag,qr_two_shot --sizes 512K:16M:2 --csv $OUT/ab.fused.$i.csv)
done
echo "[A/B done $SECONDS s]"
(run_in .snapA timers-ext
 timeout 120 python3 lab/scripts/exchange_timers.py > $OUT/exchange-timers.log 2>&1
 echo "exchange timers: exit $? [$SECONDS s]"; grep -E "^---|exchange_timers rank 0" $OUT/exchange-timers.log | head -40)
left=$((570 - SECONDS))
(run_in .snapB fused-ext
 QR_TEST_WORLD_SIZE=4 QR_TEST_SCENARIOS=passthrough_reference,graph_replays,call_mismatch,soak timeout $left \
   python3 -m pytest -q -s tests/gpu/test_dist.py -p no:cacheprovider > $OUT/tests-fused.log 2>&1
 echo "fused tests W=4: exit $? [$SECONDS s]"; grep -E "checks|passed|failed" $OUT/tests-fused.log | tail -8)
cp /tmp/qr-out/call.log $OUT/ 2>/dev/null; true
