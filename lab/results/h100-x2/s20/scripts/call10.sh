#!/usr/bin/env bash
# Session 20 call 10 (2 GPUs): lab/probes/nccl_back_to_back.py: NCCL in place, on one buffer, after a copy,
# after a one-element op (call 8 had NCCL after a copy faster than NCCL in place below 2 MB).
set -uo pipefail
DEVICE_LOG=call10.log source lab/scripts/device_lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
use head
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())" | tee -a $L
timeout 150 python3 lab/probes/nccl_back_to_back.py 2>&1 | grep -v Warning | tee -a $L
bash scripts/gpu_check.sh fold > /dev/null
