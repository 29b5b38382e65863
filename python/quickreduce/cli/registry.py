"""Every method `quickreduce bench` (and the e2e speed run) can time, by name: `make_method` and the
tables behind it.

The adapters live below this module and import only the base classes: methods.py (NCCL, torch
symmetric memory, quickreduce), epilogue.py (the all-reduce + add + RMSNorm adapters) and peers.py
(FlashInfer's peers). Only this module knows them all.
"""

from __future__ import annotations

from typing import Callable

from .epilogue import NcclUnfusedMethod, QrFusedMethod, QrUnfusedMethod
from .methods import (Method, NcclAllGatherMethod, NcclAllToAllMethod, NcclCopyMethod, NcclMethod,
                      NcclReduceScatterMethod, NcclSymmetricMethod, QuickReduceExchangeMethod, QuickReduceMethod,
                      SymmMemAllGatherMethod, SymmMemAllToAllMethod, SymmMemMethod, SymmMemReduceScatterMethod)
from .peers import PEER_METHODS, TrtllmFusedMethod
from .report import EPILOGUE, EPILOGUE_CODECS, QR_CODECS, QR_ROTATED_CODECS, QR_ROW_CODECS, UNFUSED_CODECS

EXCHANGE_NCCL: dict[str, Callable[[], Method]] = {
    "reduce_scatter": NcclReduceScatterMethod, "all_gather": NcclAllGatherMethod,
    "all_to_all": NcclAllToAllMethod}
EXCHANGE_SYMM_MEM: dict[str, Callable[[], Method]] = {
    "reduce_scatter": SymmMemReduceScatterMethod, "all_gather": SymmMemAllGatherMethod,
    "all_to_all": SymmMemAllToAllMethod}


def exchange_methods(collective: str) -> dict[str, Callable[[], Method]]:
    """Method name -> adapter factory for a reduce-scatter, all-gather or all-to-all."""
    methods: dict[str, Callable[[], Method]] = {
        "nccl": EXCHANGE_NCCL[collective],
        "nccl_symm": lambda: NcclSymmetricMethod(EXCHANGE_NCCL[collective]()),
        "symm_mem": EXCHANGE_SYMM_MEM[collective],
        "qr_passthrough": lambda: QuickReduceExchangeMethod("qr_passthrough", collective, None),
    }
    for codec in QR_ROW_CODECS + QR_ROTATED_CODECS:
        methods[f"qr_{codec}"] = lambda c=codec: QuickReduceExchangeMethod(f"qr_{c}", collective, c)
    methods["qr_auto_int4"] = lambda: QuickReduceExchangeMethod("qr_auto_int4", collective, "auto:int4")
    return methods


def all_reduce_methods() -> dict[str, Callable[[], Method]]:
    """Method name -> adapter factory for the all-reduce: NCCL's, torch symmetric memory's,
    quickreduce's and the peers (peers.PEER_METHODS)."""
    methods: dict[str, Callable[[], Method]] = {
        "nccl": NcclMethod,
        "nccl_copy": NcclCopyMethod,
        "nccl_symm": NcclSymmetricMethod,
        "symm_mem_one_shot": lambda: SymmMemMethod("symm_mem_one_shot", "one_shot"),
        "symm_mem_two_shot": lambda: SymmMemMethod("symm_mem_two_shot", "two_shot"),
        "qr_one_shot": lambda: QuickReduceMethod("qr_one_shot", "one_shot", None),
        "qr_two_shot": lambda: QuickReduceMethod("qr_two_shot", "two_shot", None),
        "qr_lossless": lambda: QuickReduceMethod("qr_lossless", "two_shot", "lossless"),
        "qr_rs_ag": lambda: QuickReduceMethod("qr_rs_ag", "rs_ag", None),
        "qr_auto": lambda: QuickReduceMethod("qr_auto", "auto", "auto"),
        "qr_auto_int4": lambda: QuickReduceMethod("qr_auto_int4", "auto", "auto:int4"),
    }
    for codec in QR_CODECS + QR_ROTATED_CODECS:
        methods[f"qr_{codec}"] = lambda c=codec: QuickReduceMethod(f"qr_{c}", "two_shot", c)
    return {**methods, **PEER_METHODS}


def epilogue_methods() -> dict[str, Callable[[], Method]]:
    """Method name -> adapter factory, for every name in report.EPILOGUE_METHOD_LOSSY."""
    methods: dict[str, Callable[[], Method]] = {
        "nccl_unfused": NcclUnfusedMethod, "trtllm_fused": TrtllmFusedMethod}
    for kind, adapter, codecs in (("fused", QrFusedMethod, EPILOGUE_CODECS),
                                  ("unfused", QrUnfusedMethod, UNFUSED_CODECS)):
        for codec in codecs:
            name = f"qr_{kind}_{codec}"
            methods[name] = lambda n=name, a=adapter, c=codec: a(n, None if c == "passthrough" else c)
    return methods


def make_method(name: str, collective: str = "all_reduce") -> Method:
    """The adapter of one method of one collective (the FlashInfer peers are all-reduces)."""
    if collective == "all_reduce":
        factories = all_reduce_methods()
    elif collective in EXCHANGE_NCCL:
        factories = exchange_methods(collective)
    elif collective == EPILOGUE:
        factories = epilogue_methods()
    else:
        raise KeyError(f"unknown collective {collective!r}")
    if name not in factories:
        raise KeyError(f"unknown {collective} method {name!r}")
    return factories[name]()
