"""Communicator.connect without a GPU: the checks it makes of every rank's peer_info() before it
maps any workspace (one node, one GPU a rank, the settings every rank must share)."""
import types

import pytest

import quickreduce as qr
from quickreduce.comm import Communicator


def _info(rank, **overrides):
    info = {"host": "node0", "handle": f"h{rank}", "device": rank, "uuid": f"GPU-{rank}",
            "max_size": 1 << 20, "packet_segment_max_bytes": 512 << 10}
    info.update(overrides)
    return info


def _connect(everyone):
    mapped = []
    me = types.SimpleNamespace(set_handles=mapped.extend)
    Communicator.connect(me, everyone)
    return mapped


def test_connect_maps_every_handle_when_ranks_agree():
    assert _connect([_info(0), _info(1)]) == ["h0", "h1"]


@pytest.mark.parametrize("key, value, words", [
    ("host", "node1", "one node"),
    ("uuid", "GPU-0", "share one GPU"),
    ("max_size", 2 << 20, "max_size"),
    ("packet_segment_max_bytes", 0, "QUICKREDUCE_PACKET_SEGMENT_MAX_KB"),
])
def test_connect_refuses_ranks_that_differ(key, value, words, monkeypatch):
    monkeypatch.delenv("QUICKREDUCE_ALLOW_SHARED_GPU", raising=False)
    with pytest.raises(qr.QuickReduceError, match=words):
        _connect([_info(0), _info(1, **{key: value})])
