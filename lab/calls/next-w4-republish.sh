#!/usr/bin/env bash
# Ready (4 GPUs; nvidia-h100-x4 may land on 4x H200 too): issue 40 and 39's republish with main: tune (-> h100-w4 or
# h200-w4 by the card), the all-reduce bench with every peer, e2e llama3-70b TP = 4, the family with every peer.
# .wheels/main-ext was rebuilt from main on 2026-11-28 after the coded reduce-scatter in LL units; rebuild
# it after any later kernel change:
#   WHEEL_ROOT=$PWD/.wheels bash lab/scripts/build_variant.sh main && bash lab/scripts/engine_gpu_check.sh pack main
# Carry .wheels/main-ext, .peers.
set -uo pipefail
DEVICE_LOG=call.log source lab/scripts/device_lib.sh
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); gpus=$(nvidia-smi -L | wc -l); echo "GPU: $gpu x $gpus"
peers
use main-ext > /dev/null
publish_w4
