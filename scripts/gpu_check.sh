#!/usr/bin/env bash
# One device call: build for sm_90 on all cores, run the GPU tests, then the benchmark.
# Logs go under $OUT (the device tool brings them back). Usage: bash scripts/gpu_check.sh [stage...]
# stages: build tests shared codecs cputests sanitize timing phases peers tune bench family epilogue moe e2e
#         examples wheels wheel:NAME so:NAME fold (default: build tests bench)
# (`timing` and `phases` run lab/ dev tools: lab/scripts/dev_timing.py, lab/scripts/phase_timers.py)
# A/B of builds in one call (machine-to-machine noise is ~0.3 us at small sizes): build wheels here
# (bash lab/scripts/build_variant.sh NAME [QR_PHASE_TIMERS=1]), carry .wheels, and run the stage
# `wheels`: each .wheels/NAME is installed in turn (WHEELS="a b a" sets the order) and benched on
# AB_SIZES with AB_METHODS into one $OUT/ab.csv (a variant column first). `wheel:NAME` installs one.
set -uo pipefail
# NVLink multicast stays off on the machines these scripts run on (they forbid it): the variables
# below, and --no-multicast on every bench, tune and e2e.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/qr-out}; mkdir -p "$OUT"
stages=${*:-build tests bench}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv  # stdout only: $OUT returns at most 8 files
# Builds and installs this tree for sm_90 (extra env settings, e.g. QR_PHASE_TIMERS=1, first); log in $OUT/$1.
install_source() {
  local log=$1; shift
  env "$@" QR_CUDA_ARCHS=90 CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip install --no-build-isolation --no-deps -q . \
    > "$OUT/$log" 2>&1 || { tail -50 "$OUT/$log"; exit 1; }
}
install_wheel() { python3 -m pip install -q --no-deps --force-reinstall .wheels/$1/*.whl || exit 1; }
for stage in $stages; do
  case $stage in
    build)
      install_source build.log
      echo "build ok" ;;
    tests)
      python3 -m pytest -q -s tests/gpu -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" | tail -40 ;;
    shared)  # every rank on GPU 0 (QR_TEST_WORLD_SIZE ranks, default 2): results, not speed;
      # SHARED_TESTS picks test files, QR_TEST_SCENARIOS a subset of their scenarios, SHARED_TAG names the log
      QR_TEST_SHARED_GPU=1 python3 -m pytest -q -s ${SHARED_TESTS:-tests/gpu} -p no:cacheprovider 2>&1 \
        | tee "$OUT/shared-w${QR_TEST_WORLD_SIZE:-2}${SHARED_TAG:+-$SHARED_TAG}.log" | tail -30 ;;
    codecs)  # each codec's own cost on one GPU (HBM to HBM, rotated beside plain), checked against the twin
      python3 -m pytest -q -s tests/gpu/test_codec_speed_gpu.py -p no:cacheprovider 2>&1 | tee "$OUT/codecs.log" | tail -3
      python3 -m quickreduce.cli codec-speed --csv "$OUT/codec-speed.csv" 2>&1 | tee -a "$OUT/codecs.log" ;;
    cputests)
      python3 -m pytest -q tests/cpu -p no:cacheprovider 2>&1 | tee "$OUT/cpu_tests.log" | tail -15 ;;
    sanitize)  # compute-sanitizer over a short checked run of every algorithm and codec (TOOLS=memcheck,...;
      # the tool `none` runs it bare; QR_SANITIZE_SHORT=1 fewer sizes, QR_SANITIZE_PARTS=all_reduce,
      # collectives,epilogue a subset). On one GPU both ranks share it (slow: time-sliced).
      for tool in ${TOOLS:-memcheck racecheck synccheck}; do
        sanitizer=(compute-sanitizer --tool "$tool" --target-processes all --report-api-errors no --error-exitcode 9)
        [ "$tool" = none ] && sanitizer=()
        timeout "${SANITIZE_TIMEOUT_S:-150}" "${sanitizer[@]}" python3 scripts/sanitize_run.py > "$OUT/sanitize-$tool.log" 2>&1
        echo "sanitize $tool: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitize-$tool.log") clean summaries)"
        grep -m3 "sanitize_run" "$OUT/sanitize-$tool.log"
        grep -m3 -E "ERROR SUMMARY|Invalid|Race|error" "$OUT/sanitize-$tool.log" || true
      done ;;
    phases)  # dev diagnostic: rebuilds with the phase timers compiled in (slower: never bench after it)
      install_source build-phases.log QR_PHASE_TIMERS=1
      python3 lab/scripts/phase_timers.py 2>&1 | tee "$OUT/phases.log" ;;
    timing)
      python3 lab/scripts/dev_timing.py 2>&1 | tee "$OUT/timing.log" ;;
    peers)
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .peers/whl/*.whl
      export PYTHONPATH=/tmp/site:$PWD/.peers/site${PYTHONPATH:+:$PYTHONPATH} FLASHINFER_CONFIDENTIAL_COMPUTE=1 ;;
    tune)  # measure the auto table; the bench stage after it uses it
      python3 -m quickreduce.cli tune --no-multicast --dtypes bf16 --out "$OUT/tuned.json" --csv "$OUT/tune.csv" --no-cache 2>&1 \
        | tail -25  # no tune.log: $OUT brings back 8 files; `quickreduce tune --from-csv` rebuilds the table
      export QUICKREDUCE_TUNE_FILE="$OUT/tuned.json" ;;
    bench)
      python3 -m quickreduce.cli bench --no-multicast --sizes 8K:1G --dtype bf16 --csv "$OUT/bench.csv" --plot "$OUT/bench.png" 2>&1 \
        | tee "$OUT/bench.log" ;;
    family)  # reduce-scatter, all-gather, all-to-all against NCCL and symm_mem (FAMILY_DTYPE, FAMILY_SIZES)
      dtype=${FAMILY_DTYPE:-bf16}
      python3 -m quickreduce.cli bench --no-multicast --collective reduce_scatter,all_gather,all_to_all --dtype "$dtype" \
        --sizes "${FAMILY_SIZES:-8K:1G:4}" --csv "$OUT/family-$dtype.csv" 2>&1 | tee "$OUT/family-$dtype.log" ;;
    epilogue)  # all-reduce + residual add + RMSNorm, fused and unfused, beside FlashInfer's fused op
      for hidden in ${EPILOGUE_HIDDEN:-4096 8192}; do
        python3 -m quickreduce.cli bench --no-multicast --epilogue add_rmsnorm --hidden "$hidden" --sizes "${EPILOGUE_SIZES:-8K:64M:4}" \
          --csv "$OUT/epilogue-h$hidden.csv" 2>&1 | tee "$OUT/epilogue-h$hidden.log"
      done ;;
    moe)  # the dynamic all-to-all: its GPU tests (MOE_WORLD ranks, default every GPU; shared-GPU mode when
      # QR_TEST_SHARED_GPU=1), then the MoE layer bench (MOE_ARGS, e.g. "--model mixtral --tokens 1,256")
      QR_TEST_WORLD_SIZE=${MOE_WORLD:-$(nvidia-smi -L | wc -l)} python3 -m pytest -q -s \
        tests/gpu/test_all_to_all_dynamic_gpu.py -p no:cacheprovider 2>&1 | tee "$OUT/moe-tests.log" | tail -30
      [ "${MOE_BENCH:-1}" = 1 ] && python3 -m quickreduce.cli bench moe --no-multicast ${MOE_ARGS:-} --csv "$OUT/moe.csv" 2>&1 \
        | tee "$OUT/moe-bench.log" | tail -60 ;;
    e2e)  # a tensor-parallel decoder per provider (E2E_ARGS: e.g. --model llama3-70b --layers 4)
      python3 -m quickreduce.cli e2e --no-multicast ${E2E_ARGS:---layers 4} --csv "$OUT/e2e.csv" --no-plot 2>&1 | tee "$OUT/e2e.log" ;;
    examples)  # examples/*.py as their docstrings say to run them (torchrun, 2 GPUs)
      for example in examples/*.py; do
        timeout 180 torchrun --nproc-per-node 2 "$example" > /tmp/example.log 2>&1
        echo "$example: exit $?" | tee -a "$OUT/examples.log"; tail -15 /tmp/example.log >> "$OUT/examples.log"
      done ;;
    wheel:*)
      install_wheel "${stage#wheel:}" && echo "installed ${stage#wheel:}" ;;
    so:*)  # this tree's Python with the extension of a carried wheel (no install, no build on the device)
      rm -f python/quickreduce/_C*.so
      python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); so = next(n for n in z.namelist() if n.startswith("quickreduce/_C"))
open("python/" + so, "wb").write(z.read(so))' .wheels/"${stage#so:}"/*.whl || exit 1
      export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}; echo "extension of ${stage#so:}" ;;
    fold)  # $OUT brings back at most 8 files: fold every log into one, drop the plots (CSVs replot them)
      (cd "$OUT" && for f in *.log; do echo "===== $f"; cat "$f"; done > /tmp/logs.txt && rm -f ./*.log ./*.png \
        && mv /tmp/logs.txt all-logs.log) ;;
    wheels)
      for name in ${WHEELS:-$(ls .wheels)}; do
        install_wheel "$name"
        python3 -m quickreduce.cli bench --no-multicast --sizes "${AB_SIZES:-8K:4M}" --dtype bf16 --replays 15 --methods \
          "${AB_METHODS:-trtllm_one_shot,trtllm_one_shot_pdl,qr_one_shot}" --csv /tmp/ab-$name.csv > /tmp/ab-$name.log 2>&1
        echo "== $name: exit $?"; grep -E "qr_|trtllm" /tmp/ab-$name.log | tail -40
        cat /tmp/ab-$name.log >> "$OUT/ab.log"
        [ -f "$OUT/ab.csv" ] || sed -n 1p /tmp/ab-$name.csv | sed 's/^/variant,/' > "$OUT/ab.csv"
        sed 1d /tmp/ab-$name.csv | sed "s/^/$name,/" >> "$OUT/ab.csv"
      done ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
