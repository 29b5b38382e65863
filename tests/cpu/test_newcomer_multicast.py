"""NVLink multicast is the caller's choice: bench, tune and e2e leave NCCL_NVLS_ENABLE and its kin as
the environment sets them, turn them off with --no-multicast, and `info` reports them."""
import os
import re
from pathlib import Path

import pytest

from quickreduce.cli import bench, e2e, info, launch, tune

VARS = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def user_env(monkeypatch):
    """A user who left multicast on (the tests' conftest turns it off for everything else)."""
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    monkeypatch.delenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", raising=False)
    monkeypatch.delenv("NVSHMEM_DISABLE_NVLS", raising=False)
    monkeypatch.setenv("RANK", "0")  # the torchrun path: the ranks run in this process
    monkeypatch.setenv("WORLD_SIZE", "2")
    seen = {}

    def in_this_process(fn, args, **kwargs):
        seen.update({k: os.environ.get(k) for k in VARS})
        return None  # as a rank other than 0

    monkeypatch.setattr(launch, "_run_in_this_process", in_this_process)
    return seen


OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
LEFT = {"NCCL_NVLS_ENABLE": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": None, "NVSHMEM_DISABLE_NVLS": None}


@pytest.mark.parametrize("flag, want", [([], LEFT), (["--no-multicast"], OFF)])
def test_bench(user_env, flag, want):
    assert bench.main(["--sizes", "64K", "--methods", "qr_one_shot", *flag]) == 0
    assert user_env == want


@pytest.mark.parametrize("flag, want", [([], LEFT), (["--no-multicast"], OFF)])
def test_tune(user_env, flag, want):
    assert tune.main(["--sizes", "64K", "--no-cache", *flag]) == 0
    assert user_env == want


@pytest.mark.parametrize("flag, want", [([], LEFT), (["--no-multicast"], OFF)])
def test_e2e(user_env, flag, want):
    assert e2e.main(["--layers", "1", "--providers", "qr_auto", *flag]) == 0
    assert user_env == want


def test_init_process_group_leaves_the_environment(monkeypatch):
    import torch.distributed as dist

    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    seen = {}
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda **kw: seen.update(nvls=os.environ["NCCL_NVLS_ENABLE"]))
    launch.init_process_group(0, 1, 0, backend="gloo")
    assert seen == {"nvls": "1"}


def test_info_reports_without_instructing(monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    monkeypatch.delenv("NVSHMEM_DISABLE_NVLS", raising=False)
    text = "\n".join(f"{label} {value}" for label, value in info.collect())
    assert re.search(r"NCCL_NVLS_ENABLE\s+1\b", text) and re.search(r"NVSHMEM_DISABLE_NVLS\s+\(unset\)", text)
    assert "should" not in text and "set it in yours" not in text


def test_the_repos_device_scripts_keep_multicast_off():
    """The machines this project is measured on forbid multicast: its own scripts pass the flag to
    every bench, tune and e2e they run."""
    calls = []
    for path in [ROOT / "scripts" / "gpu_check.sh", *sorted((ROOT / "lab" / "scripts").glob("*.sh"))]:
        text = path.read_text().replace("\\\n", " ")
        for line in text.splitlines():
            if re.search(r"quickreduce\.cli (bench|tune|e2e)\b", line) and not line.lstrip().startswith("#"):
                calls.append((path.name, line))
    assert len(calls) >= 5
    missing = [f"{name}: {line.strip()}" for name, line in calls if "--no-multicast" not in line]
    assert not missing, "\n".join(missing)


def test_bench_moe_has_the_flag():
    from quickreduce.cli import moe_bench

    assert moe_bench.build_parser().parse_args(["--no-multicast"]).no_multicast
    assert not moe_bench.build_parser().parse_args([]).no_multicast
