"""A second `pip install .` reuses the first build. pip builds every install in a new temporary
environment (another nanobind path each time), and scikit-build-core then deletes CMakeCache.txt and
the build folder's top-level CMakeFiles. So the build must keep its objects elsewhere and its compile
commands free of the environment's paths. Configured twice here (no compile), as two installs would."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str):
    found = shutil.which(name) or shutil.which(name, path="/usr/local/cuda/bin")
    if found is None:
        pytest.skip(f"{name} not found (the build needs it)")
    return found


def _configure(tmp_path: Path, env_name: str) -> str:
    """CMake configure of the project in tmp/build with nanobind importable from tmp/<env_name>
    (as in a pip build environment), after clearing what scikit-build-core clears; build.ninja."""
    nanobind = pytest.importorskip("nanobind")
    env = tmp_path / env_name
    shutil.copytree(Path(nanobind.__file__).parent, env / "nanobind", ignore=shutil.ignore_patterns("__pycache__"))
    build = tmp_path / "build"
    (build / "CMakeCache.txt").unlink(missing_ok=True)
    shutil.rmtree(build / "CMakeFiles", ignore_errors=True)
    run = subprocess.run([_tool("cmake"), "-S", str(ROOT), "-B", str(build), "-G", "Ninja",
                          f"-DPython_EXECUTABLE={sys.executable}", f"-DCMAKE_CUDA_COMPILER={_tool('nvcc')}",
                          f"-DCMAKE_MAKE_PROGRAM={_tool('ninja')}", "-DQR_CUDA_ARCHS=90",
                          f"-DCMAKE_PREFIX_PATH={env}",  # as scikit-build-core passes its site-packages
                          "-DCMAKE_BUILD_TYPE=Release"],
                         env=dict(os.environ, PYTHONPATH=str(env)), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return (build / "build.ninja").read_text()


def test_a_new_build_environment_keeps_every_object(tmp_path):
    first = _configure(tmp_path, "env1")
    second = _configure(tmp_path, "env2")
    objects = re.findall(r"^build (\S+\.o):", first, flags=re.M)
    assert any(o.endswith("dispatch.cu.o") for o in objects) and any("nb_func" in o for o in objects)
    # not where scikit-build-core deletes them
    assert not [o for o in objects if o.startswith("CMakeFiles/")], objects[:5]
    # and no compile command names the build environment: the same commands both times
    assert "env1" not in first and "env2" not in second
    assert first == second
