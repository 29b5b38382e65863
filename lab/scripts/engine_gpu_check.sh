#!/usr/bin/env bash
# The engine plugins on GPUs (tests/gpu/test_engines_gpu.py) in one device call:
#   bash lab/scripts/engine_gpu_check.sh W WHEEL_NAME
# W: ranks (2, 4); WHEEL_NAME: the carried .wheels/WHEEL_NAME (lab/scripts/build_variant.sh) whose
# extension this tree's Python uses. Needs the carried .engine-kit/ (a copy of an engine kit: vLLM's and
# SGLang's Python files and the packages the device lacks; lab/scripts/build_engine_kit.sh makes one).
# The tree is not pip-installed, so the entry points come from a distribution written from
# pyproject.toml's tables (what `pip install` writes). Writes $OUT/engines-wW.log and $OUT/engines-wW.csv.
# Environment passed on: QR_ENGINE_CODECS (default FP,LOSSLESS,INT8,FP8,INT4), QR_TEST_SCENARIOS
# (vllm_engine,sglang_engine), ENGINE_CHECK_TIMEOUT_S (default 560).
#
# The tree, the kit (~37 MB) and a wheel (~12 MB) come close to a call's 64 MiB. Here, before the call,
#   bash lab/scripts/engine_gpu_check.sh pack WHEEL_NAME
# writes .wheels/WHEEL_NAME-ext/ holding the wheel's extension alone, lzma-packed (~11 MB); carry that
# and pass WHEEL_NAME-ext.
set -uo pipefail
cd "$(git rev-parse --show-toplevel 2>/dev/null || pwd)"
if [ "${1:-}" = pack ]; then
  name=${2:?usage: engine_gpu_check.sh pack WHEEL_NAME}
  mkdir -p ".wheels/$name-ext"
  python3 - ".wheels/$name" ".wheels/$name-ext/quickreduce-ext.whl" <<'PY'
import glob, sys, zipfile
src = zipfile.ZipFile(sorted(glob.glob(sys.argv[1] + "/*.whl"))[-1])
so = next(n for n in src.namelist() if n.startswith("quickreduce/_C"))
with zipfile.ZipFile(sys.argv[2], "w", compression=zipfile.ZIP_LZMA) as dst:
    dst.writestr(so, src.read(so))
print(sys.argv[2], "holds", so)
PY
  ls -la ".wheels/$name-ext"
  exit
fi
W=${1:?usage: engine_gpu_check.sh W WHEEL_NAME}
WHEEL=${2:?usage: engine_gpu_check.sh W WHEEL_NAME}
DEVICE_LOG=engines-w$W.log source lab/scripts/device_lib.sh
use "$WHEEL" || { echo "no wheel .wheels/$WHEEL"; exit 1; }
site=/tmp/engine-site
mkdir -p "$site"
for t in .engine-kit/site_*.tar.xz; do tar -xJf "$t" -C "$site"; done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .engine-kit/whl/*.whl
python3 - "$site" <<'PY'
import os, sys, tomllib
site = sys.argv[1]
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
info = os.path.join(site, f"quickreduce-{project['version']}.dist-info")
os.makedirs(info, exist_ok=True)
open(os.path.join(info, "METADATA"), "w").write(f"Metadata-Version: 2.1\nName: quickreduce\nVersion: {project['version']}\n")
with open(os.path.join(info, "entry_points.txt"), "w") as f:
    for group, entries in project["entry-points"].items():
        f.write(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n")
PY
export PYTHONPATH=$site:$PYTHONPATH QR_ENGINE_TIMES=$OUT/engines-w$W.csv QR_TEST_WORLD_SIZE=$W QR_REQUIRE_ENGINES=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee -a "$L"
python3 -c "import torch, vllm, sglang, quickreduce; print('torch', torch.__version__, 'vllm', vllm.__version__, 'sglang', sglang.__version__)" 2>&1 | tail -1 | tee -a "$L"
timeout "${ENGINE_CHECK_TIMEOUT_S:-560}" python3 -m pytest -q -s tests/gpu/test_engines_gpu.py -p no:cacheprovider >> "$L" 2>&1
rc=$?
grep -E "checks, .* failed|passed|failed|error|Error" "$L" | tail -20
echo "engine_gpu_check W=$W: exit $rc"
exit $rc
