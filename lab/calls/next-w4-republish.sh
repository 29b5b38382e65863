#!/usr/bin/env bash
# Ready (4 GPUs; nvidia-h100-x4 may land on 4x H200 too): issue 40 and 39's republish with main: tune (h100-w4 or
# h200-w4 by the card), the all-reduce bench with every peer, e2e llama3-70b TP = 4, the family with every peer
# (2026-11-28 call ab's script) with a wheel of main's C++. Build it first:
#   WHEEL_ROOT=$PWD/.wheels bash lab/scripts/build_variant.sh main && bash lab/scripts/engine_gpu_check.sh pack main
# (.wheels/main-ext from before 2026-11-28's one-fence announce is stale). Carry .wheels/main-ext, .peers.
sed 's/fence-ext/main-ext/g' lab/calls/2026-11-28-ab-w4-republish.sh | bash
