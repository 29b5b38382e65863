#!/usr/bin/env bash
# Builds this tree as a wheel for the device (Python 3.12, sm_90) into .wheels/NAME, for
# scripts/gpu_check.sh's `wheels` stage. Extra args are env settings, e.g. QR_PHASE_TIMERS=1.
# Usage: bash lab/scripts/build_variant.sh NAME [VAR=value ...]   (PY overrides the interpreter)
set -euo pipefail
name=$1; shift
root=$(git rev-parse --show-toplevel)
dest=${WHEEL_ROOT:-$(git -C "$root" rev-parse --path-format=absolute --git-common-dir)/../.wheels}/$name
# The device runs Python 3.12: use a 3.12 with nanobind and scikit-build-core installed
# (here: PY=/root/.pyenv/versions/3.12.1/bin/python after `$PY -m pip install nanobind scikit-build-core cmake ninja`).
PY=${PY:-$(ls /root/.pyenv/versions/3.12*/bin/python 2>/dev/null | head -1)}
PY=${PY:-python3.12}
rm -rf "$dest"; mkdir -p "$dest"
env QR_CUDA_ARCHS=90 "$@" "$PY" -m pip wheel --no-build-isolation --no-deps -q "$root" -w "$dest"
ls "$dest"
