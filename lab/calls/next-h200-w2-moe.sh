#!/usr/bin/env bash
# Ready (2 GPUs, ask nvidia-h200-x2): issue 43's 2x H200 republish, call z's script (the whole `bench moe`, --iters 20,
# a2a in turns; stops at once on another card) with today's wheel main-ext (main b40b4d5's C++, built as pair-ext).
# Carry .wheels/main-ext.
sed 's/use pair-ext/use main-ext/' lab/calls/2026-11-28-z-h200-w2-moe.sh | bash
