"""The collectives' Python layer without a GPU: shapes, split sizes and the counts handed to the
kernel, and the argument errors (a stand-in communicator records what would be launched)."""
import pytest
import torch

from quickreduce import collectives, config


class FakeComm:
    """What collectives.py needs of a Communicator; exchange() records instead of launching."""

    def __init__(self, world_size=4, codecs=None):
        self.world_size, self.device, self.pdl = world_size, 0, True
        self.packet_segment_max_bytes = config.packet_segment_max_bytes()
        self.codecs = {c: (codecs or {}).get(c, "fp16") for c in config.COLLECTIVES}
        self.calls = []
        self._c = self

    def codec_for(self, collective):
        return self.codecs[collective]

    def _check_tensor(self, t, what, dtypes):
        if t.dtype not in dtypes:
            raise TypeError(f"{what} has dtype {t.dtype}")

    def all_reduce_packets_fit(self, numel, dtype, packet_max_bytes=None):
        return False  # the simulated node runs the all-reduce as two exchange calls (the same bits)

    def exchange(self, kind, in_ptr, out_ptr, dtype, codec, send, recv, stream, pdl, even_splits, packet_max_bytes):
        self.calls.append((kind, codec, send, recv))
        self.even_splits, self.packet_max_bytes = even_splits, packet_max_bytes


@pytest.fixture(autouse=True)
def no_cuda_stream(monkeypatch):
    class Stream:
        cuda_stream = 0
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())


def test_shapes_and_counts():
    comm = FakeComm(world_size=4)
    x = torch.zeros(8, 3, dtype=torch.bfloat16)
    assert collectives.reduce_scatter(comm, x).shape == (2, 3)
    assert comm.calls[-1][2:] == ([6] * 4, [6] * 4)
    assert collectives.all_gather(comm, x).shape == (32, 3)
    assert comm.calls[-1][2:] == ([24] * 4, [24] * 4)
    y = collectives.all_to_all(comm, x, input_split_sizes=[1, 0, 5, 2], output_split_sizes=[3, 3, 0, 1])
    assert y.shape == (7, 3) and comm.calls[-1][2:] == ([3, 0, 15, 6], [9, 9, 0, 3])
    assert not comm.even_splits  # split sizes given: they cross the link and are checked
    assert collectives.all_to_all(comm, x).shape == (8, 3)  # even splits
    assert comm.even_splits and comm.packet_max_bytes == comm.packet_segment_max_bytes
    assert collectives.reduce_scatter(comm, torch.zeros(12, dtype=torch.float32)).shape == (3,)


def test_codec_resolution():
    comm = FakeComm(codecs={"all_to_all": "FP8".lower()})
    x = torch.zeros(16, dtype=torch.float16)
    collectives.all_to_all(comm, x)
    assert comm.calls[-1][1] == collectives.codecs.codec_id("fp8")  # the collective's own default
    collectives.all_gather(comm, x, codec="fp32")
    assert comm.calls[-1][1] == collectives.codecs.codec_id("fp16")  # every passthrough name is one codec
    collectives.all_gather(comm, x, codec="auto")
    assert comm.calls[-1][1] == collectives.codecs.codec_id("fp16")


@pytest.mark.parametrize("call, exc, words", [
    (lambda c, x: collectives.reduce_scatter(c, x[:7]), ValueError, "divide"),
    (lambda c, x: collectives.all_to_all(c, x[:7]), ValueError, "divisible"),
    (lambda c, x: collectives.all_to_all(c, x, input_split_sizes=[1, 1, 1, 1]), ValueError, "add up"),
    (lambda c, x: collectives.all_to_all(c, x, input_split_sizes=[8]), ValueError, "4 non-negative"),
    (lambda c, x: collectives.all_to_all(c, x, input_split_sizes=[9, -1, 0, 0]), ValueError, "non-negative"),
    (lambda c, x: collectives.all_gather(c, x, out=torch.empty(8, dtype=torch.bfloat16)), ValueError, "needs 32"),
    (lambda c, x: collectives.all_gather(c, x, out=torch.empty(32)), TypeError, "dtype"),
    (lambda c, x: collectives.all_to_all(c, x, out=x), ValueError, "overlaps"),
    (lambda c, x: collectives.reduce_scatter(c, x.double()), TypeError, "dtype"),
    (lambda c, x: collectives.all_gather(c, x, codec="int3"), ValueError, "unknown codec"),
    (lambda c, x: collectives.all_to_all(c, x[0]), ValueError, "dimension"),
])
def test_argument_errors(call, exc, words):
    comm = FakeComm(world_size=4)
    with pytest.raises(exc, match=words):
        call(comm, torch.zeros(8, dtype=torch.bfloat16))
    assert comm.calls == []  # nothing launched


def test_per_collective_environment(monkeypatch):
    monkeypatch.setenv("QUICKREDUCE_QUANTIZATION", "INT8")
    monkeypatch.setenv("QUICKREDUCE_QUANTIZATION_ALL_TO_ALL", "FP8")
    assert config.default_codec("all_to_all") == "fp8"
    assert config.default_codec("reduce_scatter") == "int8"
    monkeypatch.setenv("QUICKREDUCE_QUANTIZATION_ALL_GATHER", "int2")
    with pytest.raises(ValueError, match="QUICKREDUCE_QUANTIZATION_ALL_GATHER"):
        config.default_codec("all_gather")
    with pytest.raises(ValueError, match="unknown collective"):
        config.default_codec("broadcast")
