# Sourced by a device call's script (`source lab/scripts/device_lib.sh`): what every session's call
# scripts repeated (bench/results/*/s16, s17 scripts). Sets the environment the device needs, OUT and
# the log L (DEVICE_LOG names it), and defines:
#   use NAME        this tree's Python with the extension of the carried wheel .wheels/NAME
#   peers           FlashInfer (and the other peers) from the carried .peers, on PYTHONPATH
#   qb ARGS...      `quickreduce bench --replays 9 ARGS` with a timeout (QB_TIMEOUT_S, default 60),
#                   its output appended to $L, its exit status echoed
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/qr-out}; mkdir -p "$OUT"; L=$OUT/${DEVICE_LOG:-call.log}
use() {
  rm -f python/quickreduce/_C*.so
  python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); so = next(n for n in z.namelist() if n.startswith("quickreduce/_C"))
open("python/" + so, "wb").write(z.read(so))' .wheels/"$1"/*.whl || return 1
  echo "===== variant $1" | tee -a "$L"
}
peers() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .peers/whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD/.peers/site:$PYTHONPATH FLASHINFER_CONFIDENTIAL_COMPUTE=1
}
qb() {
  local t=${QB_TIMEOUT_S:-60}
  timeout "$t" python3 -m quickreduce.cli bench --timeout $((t - 5)) --replays 9 "$@" 2>&1 | grep -vE "^\s*$" >> "$L"
  echo "bench $*: exit ${PIPESTATUS[0]}"
}
