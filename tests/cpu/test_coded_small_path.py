"""Which even segments with a scaled codec take the flag-in-data path, and what they put on the wire
(transport/workspace.hpp): the limits docs/codec-spec.md ("Small segments") states."""
import pytest

from quickreduce import _C, codecs

KiB, MiB = 1 << 10, 1 << 20
PACKET_MAX = 2 * MiB  # QUICKREDUCE_PACKET_SEGMENT_MAX_KB's default


def fits(world_size, values, codec, value_bytes=2, max_bytes=1 << 30):
    return _C.coded_packet_path_fits(world_size, max_bytes, values, value_bytes, codecs.codec_id(codec), PACKET_MAX)


def largest(world_size, codec, **kw):
    """The largest segment (values, a multiple of 256: whole warps of lanes) on the path."""
    lo, hi = 0, 4 * MiB
    while hi - lo > 256:
        mid = (lo + hi) // 2 // 256 * 256
        lo, hi = (mid, hi) if fits(world_size, mid, codec, **kw) else (lo, mid)
    return lo


@pytest.mark.parametrize("codec", ["fp8", "int8", "int6", "int4", "fp4", "int4h", "int6h"])
def test_two_gpus_take_segments_up_to_the_packet_limit(codec):
    assert fits(2, PACKET_MAX // 2, codec)
    assert not fits(2, PACKET_MAX // 2 + 8, codec)


@pytest.mark.parametrize("codec, limit", [("int4", 4 * MiB / 3), ("fp4", 4 * MiB / 3), ("int4h", 4 * MiB / 3),
                                          ("fp8", 2 * MiB / 3), ("int8", 2 * MiB / 3), ("int6", 2 * MiB / 3),
                                          ("int6h", 2 * MiB / 3)])
def test_four_gpus_take_in_at_most_two_mib(codec, limit):
    # 2 MiB in from 3 peers: 8 bytes a lane of 8 values (one unit) or 16 (two), whole warps of lanes
    bytes_ = largest(4, codec) * 2
    assert abs(bytes_ - limit) < 2 * KiB


def test_segment_limit_and_max_size_bound_the_path():
    assert not fits(2, 0, "int4")
    assert not fits(4, 64 * KiB, "int4", max_bytes=64 * KiB)  # the buffer holds 64 KiB: 4096 vectors, 8192 lanes
    assert fits(4, 64 * KiB, "int4", max_bytes=4 * MiB)
    assert largest(2, "fp8", value_bytes=4) == PACKET_MAX // 4  # fp32: the 2 MiB segment limit
    # fp32 on 4 GPUs: the units are the 16-bit tensors', so twice the bytes of segment, up to 2 MiB
    assert abs(largest(4, "fp8", value_bytes=4) * 4 - 4 * MiB / 3) < 4 * KiB
    assert largest(4, "int4", value_bytes=4) == PACKET_MAX // 4


def test_units_a_lane():
    # two units (one 16-byte vector) a lane up to 32768 lanes; int4, fp4, int4h one from there; every
    # collective and dtype alike (a lane that crosses as values instead takes one vector too)
    lanes = 32768
    for codec in ("int4", "fp4", "int4h"):
        assert _C.coded_packet_vectors(lanes * 8, codecs.codec_id(codec)) == lanes
        assert _C.coded_packet_vectors(lanes * 8 + 8, codecs.codec_id(codec)) == (lanes + 32) // 2
    for codec in ("fp8", "int8", "int6", "int6h"):
        assert _C.coded_packet_vectors(lanes * 8 + 8, codecs.codec_id(codec)) == lanes + 32
    assert _C.coded_packet_vectors(8, codecs.codec_id("int4")) == 32  # a whole warp of lanes
