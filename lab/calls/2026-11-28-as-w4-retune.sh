#!/usr/bin/env bash
# Ran 2026-11-28 as call as on the 4x H200 of calls aq / ar, still warm: the W = 4 tune (all-reduce and family) after the
# coded packet ingress rule. Carry .wheels/main-ext
source lab/scripts/device_lib.sh; use main-ext >/dev/null; timeout 170 python3 -m quickreduce.cli tune --no-multicast --gpus 4 --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16 --sizes 8K:1G:2 --timeout 165 --out $OUT/tuned-w4.json --csv $OUT/tune-w4.csv --no-cache > $OUT/tune.log 2>&1; echo "tune: exit $?"; tail -3 $OUT/tune.log
