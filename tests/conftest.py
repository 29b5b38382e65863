import os

import pytest

# Never let a test enable NVLink multicast on a shared host.
for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)


def gpu_count() -> int:
    try:
        import torch
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def pytest_collection_modifyitems(config, items):
    n = gpu_count()
    shared = os.environ.get("QR_TEST_SHARED_GPU") == "1" and n >= 1  # ranks share GPU 0 (tests/gpu/harness.py)
    for item in items:
        need = item.get_closest_marker("gpu")
        if need is not None:
            want = need.args[0] if need.args else 1
            if n < want and not shared:
                item.add_marker(pytest.mark.skip(reason=f"needs {want} CUDA GPUs, found {n} "
                                                      "(QR_TEST_SHARED_GPU=1 runs them on one, slowly)"))
