"""Independent numpy oracle of docs/codec-spec.md (written from the spec, not from the C++).

One module per piece of the spec, as csrc/ is cut: ``codecs`` (number formats, blockwise
quantize/dequantize), ``all_reduce``, ``epilogue`` (its add + RMSNorm), (the two-shot, and the fp32 all-reduce) and ``exchange``
(the segment collectives: all-gather, all-to-all, reduce-scatter). Values travel as raw bits of
the tensor dtype (uint16 for fp16/bf16, uint32 for fp32); all codec arithmetic is numpy float32
(never float64), one IEEE fp32 op with RNE each, as the spec requires. The CPU twin and the
kernels must match this bit for bit (up to the sign of zeros and NaN payloads).
"""
from .all_reduce import all_reduce, all_reduce_fp32, fp32_chunk, owners
from .codecs import (ALL_CODECS, ALL_DTYPES, BLOCK, CODECS, DIVISOR, DTYPES, EXACT, PASSTHROUGH, _e2m1, _e4m3,
                     _qdq, as_bits, bits_dtype, from_f32, fp4_unit_scale_inputs, round_to, round_trip, scale_dtype,
                     to_f32)
from .epilogue import add_rmsnorm
from .exchange import all_gather, all_to_all, even_splits, reduce_scatter, segment_dq

__all__ = ["ALL_CODECS", "ALL_DTYPES", "BLOCK", "CODECS", "DIVISOR", "DTYPES", "EXACT", "PASSTHROUGH", "add_rmsnorm", "all_gather",
           "all_reduce", "all_reduce_fp32", "all_to_all", "as_bits", "bits_dtype", "even_splits", "fp32_chunk",
           "from_f32", "fp4_unit_scale_inputs", "owners", "reduce_scatter", "round_to", "round_trip", "scale_dtype",
           "segment_dq", "to_f32"]
