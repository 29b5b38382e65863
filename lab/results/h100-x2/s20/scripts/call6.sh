#!/usr/bin/env bash
# Session 20 call 6 (4 GPUs): why the two-shot is slow at W = 4 from 1 to 64 MB (call 5: 2M 31.5 us against
# symm_mem's two-shot 18.1, 4M 40.2 against 28.3): the passthrough two-shot's CTA size (t), grid (b) and
# groups (g) swept with lab/scripts/dev_timing.py (no PDL there), beside the peers on the same machine.
set -uo pipefail
DEVICE_LOG=call6.log source lab/scripts/device_lib.sh
SECONDS=0
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
use head
peers
QB_TIMEOUT_S=90 qb --gpus 4 --methods nccl,symm_mem_two_shot,vllm_custom,trtllm_two_shot,qr_one_shot,qr_two_shot,qr_lossless \
  --sizes 1M:64M --dtype bf16 --csv $OUT/peers-w4.csv
echo "[$SECONDS s]"
m=two,two_t128,two_t256,two_t512,two_t128_g1,two_t128_g2,two_t128_g4,two_t256_g1,two_t256_g2,two_t256_g4,two_t256_g8
m=$m,two_t512_g1,two_t512_g2,two_t512_g4,two_t512_g8,two_t512_g16,two_t256_b132,two_t512_b132,two_t512_b264,two_t512_b66
m=$m,two_t256_b132_g1,two_t512_b132_g1,two_t512_b66_g1,two_t512_b132_g2,nccl,onepdl
DEV_SIZES=1,2,4,8,16,32,64 DEV_METHODS=$m timeout 240 python3 lab/scripts/dev_timing.py > $OUT/sweep-w4.log 2>&1
echo "sweep: exit $? [$SECONDS s]"; cat $OUT/sweep-w4.log | tail -9
bash scripts/gpu_check.sh fold > /dev/null
