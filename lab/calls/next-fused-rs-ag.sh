#!/usr/bin/env bash
# Ready for the next session, 4 GPUs: lab/wip/fused-rs-ag.patch (rs_ag's two packet launches as one kernel,
# the all-gather on a second packet channel) against main. Expectation (written before any run): the
# second launch and the gap between the kernels go, ~2-5 us at 1-8 MB at W = 4 (rs_ag 4 MB 32.2 -> ~28 us,
# 2 MB 19.4 -> ~16); above 8 MB rs_ag leaves the packet path either way.
# Before the call, here (the patch is not committed anywhere; .snapB holds the patched Python):
#   git worktree add /tmp/fused HEAD && (cd /tmp/fused && git apply "$PWD/lab/wip/fused-rs-ag.patch")
#   (cd /tmp/fused && WHEEL_ROOT="$OLDPWD/.wheels" bash lab/scripts/build_variant.sh fused)
#   WHEEL_ROOT=$PWD/.wheels bash lab/scripts/build_variant.sh main
#   bash lab/scripts/engine_gpu_check.sh pack fused && bash lab/scripts/engine_gpu_check.sh pack main
#   mkdir -p .snapA .snapB && git archive HEAD python tests scripts lab/scripts | tar -x -C .snapA
#   (cd /tmp/fused && tar -c python tests scripts lab/scripts) | tar -x -C .snapB
# Carry .wheels/main-ext, .wheels/fused-ext, .snapA, .snapB, .peers.
set -uo pipefail
root=$PWD
run_in() {  # run_in SNAP WHEEL: the snapshot's Python with the wheel's extension
  cd "$root/$1" && ln -sfn "$root/.wheels" .wheels && ln -sfn "$root/.peers" .peers
  DEVICE_LOG=call.log source lab/scripts/device_lib.sh; use "$2"
}
(run_in .snapB fused-ext
 QR_TEST_WORLD_SIZE=4 QR_TEST_SCENARIOS=passthrough_reference,graph_replays,call_mismatch,soak timeout 240 \
   python3 -m pytest -q -s tests/gpu/test_dist.py -p no:cacheprovider > $OUT/tests-fused.log 2>&1
 echo "fused tests W=4: exit $?"; grep -E "checks|passed|failed" $OUT/tests-fused.log | tail -8)
for i in 1 2; do
  (run_in .snapA main-ext; peers; qb --methods qr_rs_ag,qr_two_shot --sizes 512K:16M:2 --csv $OUT/ab.main.$i.csv)
  (run_in .snapB fused-ext; peers; qb --methods qr_rs_ag,qr_two_shot --sizes 512K:16M:2 --csv $OUT/ab.fused.$i.csv)
done
(run_in .snapA main-ext; peers; qb --methods symm_mem_two_shot,vllm_custom,trtllm_one_shot_pdl,nccl --sizes 512K:16M:2 --csv $OUT/ab.peers.csv)
(run_in .snapB fused-ext
 CUDA_VISIBLE_DEVICES=0 QR_TEST_SHARED_GPU=1 QR_TEST_WORLD_SIZE=8 QR_TEST_SCENARIOS=passthrough_reference,graph_replays \
   timeout 200 python3 -m pytest -q -s tests/gpu/test_dist.py -p no:cacheprovider > $OUT/tests-fused-w8.log 2>&1
 echo "fused tests W=8 shared: exit $?"; grep -E "checks|passed|failed" $OUT/tests-fused-w8.log | tail -4)
