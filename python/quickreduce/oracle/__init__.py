"""Independent numpy oracle of docs/codec-spec.md (written from the spec, not from the C++).

One module per piece of the spec, as csrc/ is cut: ``codecs`` (number formats, blockwise
quantize/dequantize) and one module per collective. Values travel as raw bits of the tensor dtype;
all codec arithmetic is numpy float32 (never float64), one IEEE fp32 op with RNE each, as the spec
requires. The CPU twin and the kernels must match this bit for bit (up to the sign of zeros and
NaN payloads).
"""
from .all_reduce import all_reduce, owners
from .codecs import (BLOCK, CODECS, DIVISOR, DTYPES, EXACT, PASSTHROUGH, _e2m1, _e4m3, _qdq, from_f32,
                     fp4_unit_scale_inputs, round_to, round_trip, to_f32)

__all__ = ["BLOCK", "CODECS", "DIVISOR", "DTYPES", "EXACT", "PASSTHROUGH", "all_reduce", "from_f32",
           "fp4_unit_scale_inputs", "owners", "round_to", "round_trip", "to_f32"]
