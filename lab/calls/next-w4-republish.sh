#!/usr/bin/env bash
# Ready (4 GPUs; ask nvidia-h200-x4 when `status` lists it, else nvidia-h100-x4): issue 40 and 39's republish with
# main: the 2026-11-27 call l (on 4x H200 tune -> h200-w4, the all-reduce bench with every peer, e2e llama3-70b TP = 4;
# on either card the family with every peer, tests at W = 8 shared and W = 4) with today's wheel main-ext (main
# b40b4d5's C++). Carry .wheels/main-ext, .peers.
sed 's/use s23d-ext/use main-ext/' lab/calls/2026-11-27-l-final.sh | bash
