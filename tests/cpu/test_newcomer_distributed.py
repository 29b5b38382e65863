"""The torch backend on every torch from 2.11 on: the collectives torch 2.14 added (gather_single,
gather_into_tensor, reconfigure) and any a later torch adds never reach torch's GIL-holding trampoline."""
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist

import quickreduce.distributed as qd


class Backend:  # records which binding each forwarded call reached
    def __init__(self, label):
        self.label, self.calls = label, []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.calls.append((name, args, kwargs)) or (self.label, name)


def _stand_in(fallback="gloo"):
    PG = qd.ProcessGroupQuickreduce
    pg = SimpleNamespace(_backends={"cpu": Backend("cpu"), "cuda": Backend("cuda")}, fallback=fallback)
    pg._backend_of = lambda kind, collective: PG._backend_of(pg, kind, collective)
    pg._backend_for = lambda tensors, collective: PG._backend_for(pg, tensors, collective)
    return pg


def test_every_collective_of_this_torch_is_ours():
    collectives = qd._torch_collectives()
    assert {"allreduce", "broadcast", "barrier", "alltoall_base"} <= set(collectives)
    missing = [n for n in collectives if n not in vars(qd.ProcessGroupQuickreduce)]
    assert not missing, missing


def test_torch_2_14_collectives_forward_to_the_backend():
    PG, pg = qd.ProcessGroupQuickreduce, _stand_in()
    out, t = torch.zeros(4), torch.zeros(2)
    opts = dist.GatherOptions()
    assert PG.gather_single(pg, out, t, opts) == ("cpu", "gather_single")
    assert pg._backends["cpu"].calls[-1] == ("gather_single", (out, t, opts), {})
    assert PG.gather_into_tensor(pg, out, t) == ("cpu", "gather_into_tensor")
    with pytest.raises(NotImplementedError, match="reconfigure"):
        PG.reconfigure(pg, object())


def test_a_collective_torch_adds_later_gets_a_forwarder(monkeypatch):
    monkeypatch.setattr(qd, "_torch_collectives", lambda: ["allreduce", "broadcast", "brand_new_single"])

    class Group(qd.ProcessGroupQuickreduce):
        pass

    assert qd._forward_new_collectives(Group) == ["brand_new_single"]
    assert Group.allreduce is qd.ProcessGroupQuickreduce.allreduce  # ours stay ours
    pg = _stand_in()
    t = torch.zeros(2)
    assert Group.brand_new_single(pg, [[t]], t, 3, tag=1) == ("cpu", "brand_new_single")
    assert pg._backends["cpu"].calls[-1] == ("brand_new_single", ([[t]], t, 3), {"tag": 1})
    assert Group.brand_new_single(pg) == ("cpu", "brand_new_single")  # no tensor: gloo's device
    assert Group.brand_new_single(_stand_in("nccl")) == ("cuda", "brand_new_single")  # NCCL's
    with pytest.raises(ValueError, match="no backend for meta tensors"):
        Group.brand_new_single(pg, torch.zeros(1, device="meta"))
