"""tilecraft from Python: the C++ operators on torch tensors (CUDA or CPU) and
numpy arrays, zero-copy through DLPack.

    import torch, tilecraft
    out = tilecraft.fused_moe(x, w_router, w_gate, w_up, w_down, top_k=8)
    print(tilecraft.env()["gpu"])

CUDA work runs on torch's current stream; results come back as the caller's
tensor type. Errors raise ValueError (bad arguments), TypeError (dtypes) or
RuntimeError (CUDA), carrying the C++ message. The JIT, its cache and its
TILECRAFT_* environment variables behave as they do from C++.
"""
from __future__ import annotations

import json as _json

from . import _C
from ._ops import (
    FusedMoE,
    fused_moe,
    moe_fused_mapping,
    moe_grouped_gemm,
    moe_reduce_fused,
    moe_topk_gate,
)

__version__: str = _C.__version__

__all__ = [
    "FusedMoE",
    "compile",
    "env",
    "fused_moe",
    "main",
    "moe_fused_mapping",
    "moe_grouped_gemm",
    "moe_reduce_fused",
    "moe_topk_gate",
]


def env(device: int | None = None) -> dict:
    """The machine as `tilecraft env` reports it (GPU or the reason there is none,
    driver, CUDA and NVRTC versions, build, commit, every GPU by CUDA ordinal).
    `device` names the GPU to describe (default 0); a GPU this process does not
    see raises ValueError, and any `device` where no GPU is usable RuntimeError."""
    if device is not None and (isinstance(device, bool) or not isinstance(device, int)):
        raise TypeError(f"env: argument 'device': expected an int (a CUDA ordinal) or None, got {type(device).__name__}")
    return _json.loads(_C.env_json(device))


def compile(op: str, shape: str | None = None, *, workload: str = "", arch: str = "",
            options: str = "release") -> list[dict]:
    """Pre-compiles the kernels `op` needs for `shape` (e.g. 'T=777,K=6,H=5120,dtype=bf16')
    or for a manifest workload (all of the op's default workloads when neither is
    given), for `arch` (default: this GPU's, else sm_90a). Returns one dict per kernel."""
    return _C.compile(op, [shape] if shape else [], workload, arch, options)


def main(argv: list[str] | None = None) -> int:
    """The `tilecraft` command line (same flags, output and exit codes)."""
    import sys

    return _C.run_cli(list(sys.argv[1:] if argv is None else argv))
