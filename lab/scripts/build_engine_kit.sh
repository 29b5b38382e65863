#!/usr/bin/env bash
# Builds an engine kit (like ../shared/engine-kit) from the registry: vLLM's and SGLang's Python files and
# the light packages their distributed modules import, for GPU machines that have torch but no engines and
# no network, and whose call carries at most 64 MiB (vLLM's wheel alone is ~320 MiB; its Python is ~25 MB).
#
#   bash lab/scripts/build_engine_kit.sh OUT_DIR
#
# Environment (defaults in brackets): VLLM_VERSION [0.33.0], SGLANG_VERSION [0.5.23], KIT_PYTHON [3.12]
# (the GPU machines' Python), KIT_PLATFORM [manylinux_2_34_x86_64: the newest glibc tag accepted, older ones
# too; SGLang 0.5.23's wheels need 2.34], KIT_PACKAGES [the 36 packages of the 0.33.0/0.5.23 kit], KIT_HAVE [unset: a
# `pip freeze` of the GPU machine; packages it lists are left out], WHEEL_CACHE [OUT_DIR/.download: where
# the wheels are downloaded; a second run reuses them].
#
# What it makes, in OUT_DIR:
#   site_vllm.tar.xz    vllm/**/*.py and its dist-info (no compiled module), with two changes:
#                       an empty vllm/_C_stable_libtorch.py (vllm/platforms/cuda.py imports that compiled
#                       module at top level, and the real one is built for vLLM's own torch), and, where the
#                       pattern is found, PyNccl's symbol loader skipping missing optional symbols on CUDA too
#                       (vLLM 0.33 wants NCCL 2.29.7's suspend/resume symbols, whose calls are guarded, and
#                       refuses an older NCCL without this). Both are in KIT_PATCHES.diff.
#   site_sglang.tar.xz  sglang/**/*.py, its JIT kernel sources (sglang/kernels/jit: .cuh .cu .h ...), dist-info
#   whl/                one wheel each of KIT_PACKAGES for KIT_PYTHON on x86_64 Linux, versions within the
#                       engines' requirements (vLLM's where the two disagree)
#   README.md           versions, sizes, and how to use it on the GPU machine
# Check the result on a GPU machine: lab/scripts/engine_gpu_check.sh (carry the kit as .engine-kit/).
set -euo pipefail
out=${1:?usage: build_engine_kit.sh OUT_DIR}
VLLM_VERSION=${VLLM_VERSION:-0.33.0}
SGLANG_VERSION=${SGLANG_VERSION:-0.5.23}
KIT_PYTHON=${KIT_PYTHON:-3.12}
KIT_PACKAGES=${KIT_PACKAGES:-"aiohappyeyeballs aiosignal annotated-doc annotated-types anyio apache-tvm-ffi cachetools cbor2
  compressed-tensors dill distro fastapi frozenlist gguf h11 httpcore ipython jiter llguidance loguru msgspec multidict
  openai orjson oss-harmony partial-json-parser propcache pybase64 pydantic pydantic-core pyzmq sniffio starlette traitlets
  typing-inspection xgrammar"}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cache=${WHEEL_CACHE:-$out/.download}
mkdir -p "$cache"
pyver=${KIT_PYTHON//./}
glibc=${KIT_PLATFORM:-manylinux_2_34_x86_64}
glibc_minor=$(echo "$glibc" | sed -E 's/manylinux_2_([0-9]+)_.*/\1/')
platforms=()
for m in $(seq "$glibc_minor" -1 5); do platforms+=(--platform "manylinux_2_${m}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64
            --platform linux_x86_64)
target=(--only-binary=:all: --python-version "$KIT_PYTHON" --implementation cp --abi "cp$pyver" --abi abi3 --abi none
        "${platforms[@]}")
download() { python3 -m pip download -q --no-deps "${target[@]}" -d "$cache" "$@"; }

echo "engines: vllm==$VLLM_VERSION sglang==$SGLANG_VERSION for Python $KIT_PYTHON"
download "vllm==$VLLM_VERSION" "sglang==$SGLANG_VERSION"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$cache" "$work" "$out" "$VLLM_VERSION" "$SGLANG_VERSION" "$KIT_PYTHON" "${KIT_HAVE:-}" $KIT_PACKAGES <<'PY'
"""Unpack the engines' Python files, patch them, and write the light packages' pinned names (with the
engines' version constraints) to WORK/packages.txt."""
import difflib, glob, os, re, sys, zipfile

cache, work, out, vllm_version, sglang_version, pyver, have_file, *packages = sys.argv[1:]
from pip._vendor.packaging.requirements import Requirement  # pip's own copy: no extra install
from pip._vendor.packaging.utils import canonicalize_name

def wheel(name, version):
    found = [p for p in glob.glob(os.path.join(cache, f"{name}-{version}-*.whl"))]
    if not found:
        sys.exit(f"no wheel of {name}=={version} in {cache}")
    return zipfile.ZipFile(sorted(found)[-1])

def unpack(z, dest, keep):
    n = 0
    for info in z.infolist():
        name = info.filename
        if name.endswith("/") or name.endswith(".dist-info/RECORD") or not keep(name):
            continue
        path = os.path.join(dest, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(z.read(info))
        n += 1
    return n

vz, sz = wheel("vllm", vllm_version), wheel("sglang", sglang_version)
vdest, sdest = os.path.join(work, "vllm-site"), os.path.join(work, "sglang-site")
print("vllm files:", unpack(vz, vdest, lambda n: n.endswith(".py") or ".dist-info/" in n))
jit = re.compile(r"^sglang/kernels/jit/.*\.(cuh|cu|h|hpp|cpp|txt|md)$|^sglang/kernels/jit/.*LICENSE$")
print("sglang files:", unpack(sz, sdest, lambda n: n.endswith(".py") or ".dist-info/" in n or bool(jit.match(n))))

# the kit's changes to vLLM
diff = []
stub = os.path.join(vdest, "vllm", "_C_stable_libtorch.py")
if not os.path.exists(stub):
    text = ("# KIT STUB (not part of vLLM). vllm/platforms/cuda.py imports vllm._C_stable_libtorch\n"
            "# unconditionally (a compiled module built for vLLM's own torch, not shipped in the kit). This empty\n"
            "# module lets CudaPlatform import; the custom ops it would register (torch.ops._C*, the custom\n"
            "# all-reduce) are absent, so vLLM's TP all-reduce is PyNccl. Delete it where the real module exists.\n")
    open(stub, "w").write(text)
    diff += difflib.unified_diff([], text.splitlines(True), "/dev/null", "vllm/_C_stable_libtorch.py")
wrapper = os.path.join(vdest, "vllm", "distributed", "device_communicators", "pynccl_wrapper.py")
if os.path.exists(wrapper):
    before = open(wrapper).read()
    pattern = re.compile(r"^(?P<pad>[ \t]+)if current_platform\.is_rocm\(\):\n(?P=pad)[ \t]+continue\n", re.M)
    m = pattern.search(before)
    if m:
        pad = m.group("pad")
        after = before[:m.start()] + (f"{pad}# KIT PATCH: also skip on CUDA, so an older NCCL (the GPU machine's\n"
                                      f"{pad}# torch's) loads; the optional symbols' calls are guarded.\n"
                                      f"{pad}continue\n") + before[m.end():]
        open(wrapper, "w").write(after)
        name = "vllm/distributed/device_communicators/pynccl_wrapper.py"
        diff += difflib.unified_diff(before.splitlines(True), after.splitlines(True), "a/" + name, "b/" + name)
        print("patched", name)
    else:
        print("NOTE: pynccl_wrapper.py has no `if current_platform.is_rocm(): continue` to patch: check that "
              "PyNccl loads with the GPU machine's NCCL")
open(os.path.join(out, "KIT_PATCHES.diff"), "w").write(
    "# The kit's changes to the pristine vllm wheel's files (applied inside site_vllm.tar.xz)\n" + "".join(diff))

# the light packages, constrained by the engines' requirements (vLLM's first)
target = {"python_version": pyver, "python_full_version": pyver + ".0", "sys_platform": "linux",
          "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
          "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
constraints = {}
for z in (vz, sz):
    meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    for line in meta.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.marker is not None and not req.marker.evaluate(target):
            continue
        key = canonicalize_name(req.name)
        if key not in constraints and str(req.specifier):
            constraints[key] = str(req.specifier)
have = set()
if have_file:
    for line in open(have_file):
        name = re.split(r"[=<>@ ]", line.strip(), maxsplit=1)[0]
        if name:
            have.add(canonicalize_name(name))
wanted = []
for p in packages:
    key = canonicalize_name(p)
    if key in have:
        continue
    wanted.append(p + constraints.get(key, ""))
open(os.path.join(work, "packages.txt"), "w").write("\n".join(wanted) + "\n")
print("packages:", " ".join(wanted))
PY

rm -rf "$out/whl"
mkdir -p "$out/whl"
# one wheel per package, each within the engines' constraints (no dependencies: the list is the closure)
xargs -a "$work/packages.txt" python3 -m pip download -q --no-deps "${target[@]}" -d "$out/whl"
tar -cJf "$out/site_vllm.tar.xz" -C "$work/vllm-site" .
tar -cJf "$out/site_sglang.tar.xz" -C "$work/sglang-site" .
total=$(du -cb "$out/site_vllm.tar.xz" "$out/site_sglang.tar.xz" "$out/whl" | tail -1 | cut -f1)
cat > "$out/README.md" <<EOF
# engine-kit: vLLM $VLLM_VERSION and SGLang $SGLANG_VERSION Python code for the GPU machines

Made by \`lab/scripts/build_engine_kit.sh\` on $(date -u +%Y-%m-%d) from the registry's wheels for Python $KIT_PYTHON
(x86_64 Linux). $((total / 1000000)) MB in all.

- \`site_vllm.tar.xz\`: vllm/*.py and its dist-info (no compiled modules), with the changes in \`KIT_PATCHES.diff\`.
  Without vLLM's compiled ops its custom all-reduce is off, and its TP all-reduce is PyNccl.
- \`site_sglang.tar.xz\`: sglang/*.py, its JIT kernel sources and dist-info.
- \`whl/\`: $(ls "$out/whl" | wc -l) wheels: $(ls "$out/whl" | sed -E 's/-([0-9][^-]*)-.*/==\1/' | tr '\n' ' ')

On the GPU machine, in a copy of this folder that the call carries (lab/scripts/engine_gpu_check.sh does it):

    mkdir -p /tmp/site && for t in site_*.tar.xz; do tar -xJf "\$t" -C /tmp/site; done
    python3 -m pip install -q --no-index --no-deps --target /tmp/site whl/*.whl && export PYTHONPATH=/tmp/site
EOF
ls -la "$out" "$out/whl" | tail -n +1 | head -60
echo "kit: $out ($((total / 1000000)) MB)"
