# Sourced by a device call's script (`source lab/scripts/device_lib.sh`): what every session's call
# scripts repeated (bench/results/*/s16, s17 scripts). Sets the environment the device needs, OUT and
# the log L (DEVICE_LOG names it), and defines:
#   use NAME        this tree's Python with the extension of the carried wheel .wheels/NAME
#   peers           FlashInfer (and the other peers) from the carried .peers, on PYTHONPATH
#   qb ARGS...      `quickreduce bench --replays 9 ARGS` with a timeout (QB_TIMEOUT_S, default 60),
#                   its output appended to $L, its exit status echoed
#   speed VARIANT [ARGS...]   `quickreduce codec-speed ARGS` appended to $OUT/codec-speed.csv, VARIANT its first
#                   column (session 19's call scripts each had a copy)
#   ab_rows CSV COLUMN        one line per (method, size) of a CSV whose first column names the run
#                   (COLUMN), the runs side by side
#   ab_family CSV V...        `quickreduce bench` CSVs concatenated with the variant as a first column: one
#                   line per (collective, method, size), each variant's times side by side
#   ab_a2a CSV V...           `bench moe --part a2a` CSVs concatenated with the variant as a first column:
#                   one line per (bytes, skew), each variant's dynamic/host-sized us side by side
#   moe_ab PART CSV T A B [ARGS...]   A B A B runs of `bench moe --part PART ARGS` (timeout T s each) with the
#                   wheels A and B, each appended to CSV with its variant as a first column (for ab_a2a / ab_layer)
#   publish_w4                tune + all-reduce bench + e2e 70B TP4 + family on 4 GPUs (after peers and use)
#   ab_layer CSV V...         `bench moe --part layer` CSVs likewise: one line per (model, tokens, skew, method) for
#                   qr_graph and nccl, each variant's us side by side
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
  timeout "$t" python3 -m quickreduce.cli bench --no-multicast --timeout $((t - 5)) --replays 9 "$@" 2>&1 | grep -vE "^\s*$" >> "$L"
  echo "bench $*: exit ${PIPESTATUS[0]}"
}
speed() {
  local variant=$1; shift
  timeout 60 python3 -m quickreduce.cli codec-speed "$@" --csv /tmp/cs.csv > /tmp/cs.txt 2>&1
  echo "codec-speed $variant: exit $?"; cat /tmp/cs.txt >> "$L"; grep -E "^ *(int|fp)" /tmp/cs.txt
  [ -f "$OUT/codec-speed.csv" ] || sed -n 1p /tmp/cs.csv | sed 's/^/variant,/' > "$OUT/codec-speed.csv"
  sed 1d /tmp/cs.csv | sed "s/^/$variant,/" >> "$OUT/codec-speed.csv"
}
ab_rows() {
  python3 - "$1" "$2" <<'PY'
import collections, csv, sys
rows = collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    rows[(r["method"], int(r["size_bytes"]))].append(f"{r[sys.argv[2]]}:{float(r['time_us']):8.2f}")
for (method, size), runs in sorted(rows.items()):
    print(f"{method:18s} {size:>10d}  " + "  ".join(runs))
PY
}
ab_a2a() {
  python3 - "$@" <<'PY'
import collections, sys
t = collections.defaultdict(lambda: collections.defaultdict(list))
head = None
for line in open(sys.argv[1]):
    v, rest = line.rstrip("\n").split(",", 1)
    if rest.startswith("part"): head = rest.split(","); continue
    r = dict(zip(head, rest.split(",")))
    t[(int(r["bytes"]), r["skew"])][v].append(f"{r['dynamic_us']}/{r['host_sized_us']}")
for k, d in sorted(t.items()):
    print(k, *(f"{v} " + " ".join(d[v]) for v in sys.argv[2:]))
PY
}
ab_family() {
  python3 - "$@" <<'PY'
import collections, sys
t = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    v, rest = line.split(",", 1)
    if rest.startswith("size_bytes"): continue
    f = rest.strip().split(",")
    t[(f[-1], f[3], int(f[0]))][v].append(float(f[4]))
for (c, m, s), d in sorted(t.items()):
    print(f"{c:15s} {m:15s} {s:>11d}  " + "  ".join(f"{v} " + " ".join(f"{x:8.1f}" for x in d[v]) for v in sys.argv[2:]))
PY
}
ab_layer() {
  python3 - "$@" <<'PY'
import collections, sys
t = collections.defaultdict(lambda: collections.defaultdict(list)); head = None
for line in open(sys.argv[1]):
    v, rest = line.rstrip("\n").split(",", 1)
    if rest.startswith("part"): head = rest.split(","); continue
    r = dict(zip(head, rest.split(",")))
    if r["method"] in ("qr_graph", "nccl"): t[(r["model"], int(r["tokens"]), r["skew"], r["method"])][v].append(r["us"])
for k, d in sorted(t.items()): print(*k, *(f"{v} " + " ".join(d[v]) for v in sys.argv[2:]))
PY
}
moe_ab() {
  local part=$1 csv=$2 t=$3 a=$4 b=$5 v
  shift 5
  for v in "$a" "$b" "$a" "$b"; do
    use "$v"-ext > /dev/null
    timeout "$t" python3 -m quickreduce.cli bench moe --no-multicast --gpus "$(nvidia-smi -L | wc -l)" --part "$part" \
      --timeout $((t - 5)) "$@" --csv /tmp/moe-ab.csv > /tmp/moe-ab.log 2>&1
    echo "moe $part $v: exit $? [$SECONDS s]"; sed "s/^/$v,/" /tmp/moe-ab.csv >> "$csv"; cat /tmp/moe-ab.log >> "$L"
  done
}
# publish_w4: what a 4-GPU republish runs (2026-11-27 call l, 2026-11-28 calls ab / ag): tune -> $OUT/tuned-w4.json (its
# table then drives `auto`), the all-reduce bench with every peer, e2e llama3-70b TP = 4, the family with every peer in
# the time left of 590 s. Call after `peers` and `use`.
publish_w4() {
  timeout 150 python3 -m quickreduce.cli tune --no-multicast --gpus 4 --collectives reduce_scatter,all_gather,all_to_all --dtypes bf16 \
    --sizes 8K:1G:2 --timeout 145 --out $OUT/tuned-w4.json --csv $OUT/tune-w4.csv --no-cache >> $L 2>&1
  echo "tune: exit $? [$SECONDS s]"
  [ -f $OUT/tuned-w4.json ] && export QUICKREDUCE_TUNE_FILE=$OUT/tuned-w4.json
  timeout 150 python3 -m quickreduce.cli bench --no-multicast --gpus 4 --sizes 8K:1G --dtype bf16 --timeout 145 \
    --csv $OUT/bench-w4.csv --plot $OUT/bench-w4.png > /tmp/bench.log 2>&1
  echo "bench: exit $? [$SECONDS s]"; cat /tmp/bench.log >> $L
  timeout 120 python3 -m quickreduce.cli e2e --no-multicast --model llama3-70b --layers 4 --gpus 4 --prefill 1024,4096,8192 --batches 1,16,64,256 \
    --providers nccl,nccl_symm,symm_mem_two_shot,symm_mem_one_shot,trtllm_one_shot,trtllm_one_shot_pdl,trtllm_two_shot,qr_auto,qr_lossless,qr_auto_int6,qr_auto_int4 \
    --timeout 115 --csv $OUT/e2e-llama3-70b-L4.csv --no-plot > /tmp/e2e.log 2>&1
  echo "e2e: exit $? [$SECONDS s]"; cat /tmp/e2e.log >> $L; grep -A8 "time_ms ('\*'" /tmp/e2e.log
  local left=$((590 - SECONDS))
  timeout $left python3 -m quickreduce.cli bench --no-multicast --gpus 4 --collective reduce_scatter,all_gather,all_to_all --dtype bf16 \
    --sizes 8K:1G:4 --timeout $((left - 5)) --csv $OUT/family-bf16.csv > /tmp/family.log 2>&1
  echo "family: exit $? [$SECONDS s]"; cat /tmp/family.log >> $L
}
