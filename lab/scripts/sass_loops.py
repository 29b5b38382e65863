# Dev tool: static SASS size of the two-shot kernels' loops, without a GPU.
# The codec kernels' time follows their instruction count (lab/NOTES.md, change 12), so a change
# that shrinks these loops is worth a device run; one that grows them is not.
#
#   python3 lab/scripts/sass_loops.py [CODEC] [DTYPE] [W]  e.g. Int4Codec 1 2 (1 = bf16, 0 = fp16; W: the
#                                                     world-size specialisation, where kernels have one)
#
# Needs nvcc and cuobjdump (this machine has no cuobjdump: `pip download --no-deps triton`, unzip
# triton/backends/nvidia/bin/cuobjdump from the wheel and put it on PATH).
import collections
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")  # the repo root


def sass(cubin: str) -> str:
    return subprocess.run(["cuobjdump", "-sass", cubin], check=True, capture_output=True, text=True).stdout


def kernel_lines(text: str, codec: str, dtype: str, world: str) -> list[tuple[int, str]]:
    pattern = re.compile(rf"Function : _ZN2qr15two_shot_kernelINS_\d+{codec}ELNS_5DTypeE{dtype}E(?:Li{world}E)?EEv")
    out, inside = [], False
    for line in text.splitlines():
        if "Function :" in line:
            inside = bool(pattern.search(line))
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if inside and m:
            out.append((int(m.group(1), 16), re.sub(r"\s+", " ", m.group(2))))
    return out


def main() -> None:
    codec = sys.argv[1] if len(sys.argv) > 1 else "Int4Codec"
    dtype = sys.argv[2] if len(sys.argv) > 2 else "1"
    world = sys.argv[3] if len(sys.argv) > 3 else "2"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "dispatch.cubin")
        subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "-cubin", "--fmad=false", "-O3", "-I", os.path.join(ROOT, "csrc"),
                        "-o", cubin, os.path.join(ROOT, "csrc", "collectives", "dispatch.cu")], check=True)
        lines = kernel_lines(sass(cubin), codec, dtype, world)
    if not lines:
        sys.exit(f"no two_shot_kernel<{codec}, dtype {dtype}> in the SASS")
    print(f"two_shot_kernel<{codec}, dtype {dtype}>: {len(lines)} instructions")
    for addr, ins in lines:  # every backward branch closes a loop
        m = re.search(r"BRA (0x[0-9a-f]+)", ins)
        if m and int(m.group(1), 16) < addr:
            start = int(m.group(1), 16)
            body = [i for a, i in lines if start <= a <= addr]
            ops = collections.Counter(re.sub(r"^@!?U?P[0-9T] ", "", i).split(" ")[0].split(".")[0] for i in body)
            print(f"  loop {start:#06x}..{addr:#06x}: {len(body):4d} instr  " +
                  " ".join(f"{op}:{n}" for op, n in ops.most_common(8)))


if __name__ == "__main__":
    main()
