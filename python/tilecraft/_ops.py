"""Python faces of the C++ operators. Arguments are named as in the manifest
(manifest/moe.yaml); outputs are allocated with the caller's framework (torch
or numpy) on the inputs' device unless passed with out=/ids=/..."""
from __future__ import annotations

import numbers
import operator
from typing import Any, Sequence

from . import _C

Tensor = Any  # a torch.Tensor or numpy.ndarray (anything exporting DLPack)

def _tensor(op: str, name: str, t: Any, ndim: int | None = None) -> Any:
    """t itself if it is a tensor (has a shape and exports DLPack) of `ndim` dimensions; else an error
    naming the op and the argument (not an AttributeError from deep inside)."""
    if not hasattr(t, "shape") or not hasattr(t, "__dlpack__"):
        raise TypeError(f"{op}: argument '{name}': expected a torch.Tensor or numpy.ndarray, got {type(t).__name__}")
    dtype = getattr(t, "dtype", None)
    kind, size = getattr(dtype, "kind", "f"), getattr(dtype, "itemsize", 0)
    numeric = _is_torch(t) or (kind in "biuf" and size <= 8) or kind == "c"
    if not numeric:
        # numpy arrays DLPack cannot carry (object, datetime, long double, strings) would fail in the
        # binding's signature match, naming no argument
        raise TypeError(f"{op}: argument '{name}': expected a tensor of a dtype DLPack carries (integers, "
                        f"floats), got dtype {dtype}")
    if ndim is not None and len(t.shape) != ndim:
        raise ValueError(f"{op}: argument '{name}': expected a {ndim}-D tensor, got shape {tuple(t.shape)}")
    return t


def _optional_tensors(op: str, **tensors: Any) -> None:
    """Each argument given (not None) is a tensor; else an error naming it."""
    for name, t in tensors.items():
        if t is not None:
            _tensor(op, name, t)


def _out_dtype(op: str, v: Any, allowed: Sequence[str]) -> str | None:
    """out_dtype as a name ('float16', torch.float16 or numpy's float16 alike), one of `allowed`."""
    if v is None:
        return None
    name = None
    if isinstance(v, str):
        name = v
    elif _is_torch_dtype(v):
        name = str(v).split(".")[-1]  # torch.float16 -> float16
    elif type(v).__module__.startswith("numpy") or str(getattr(v, "__module__", "")).startswith("numpy"):
        # np.float16, np.dtype("float16"); anything else numpy (an array, a scalar) is refused below
        import numpy as np

        try:
            name = np.dtype(v).name
        except TypeError:
            name = None
    if name not in allowed:
        raise ValueError(f"{op}: argument 'out_dtype': expected None or one of {', '.join(allowed)}, got {v!r}")
    return name


def _is_torch_dtype(v: Any) -> bool:
    return type(v).__module__ == "torch" and type(v).__name__ == "dtype"


def _integer(v: Any) -> int | None:
    """v as an int if it is an integer of any type (numpy's too, through __index__), not a bool;
    else None."""
    if isinstance(v, bool):
        return None
    try:
        return operator.index(v)
    except TypeError:
        return None


_INT_MAX = 2**31 - 1  # the C++ side takes these as int: a larger Python int would fail its signature, unnamed


def _count(op: str, name: str, v: Any, lo: int) -> int:
    """v as an int in lo.._INT_MAX (sizes the outputs, so checked before they are allocated)."""
    n = _integer(v)
    if n is None or not lo <= n <= _INT_MAX:
        raise ValueError(f"{op}: argument '{name}': expected an integer in {lo}..{_INT_MAX}, got {v!r}")
    return n


def _int32(op: str, name: str, v: Any) -> int:
    """v as a 32-bit int (its meaning is checked in C++, which takes an int)."""
    n = _integer(v)
    if n is None:
        raise TypeError(f"{op}: argument '{name}': expected an integer, got {v!r}")
    if not -_INT_MAX - 1 <= n <= _INT_MAX:
        raise ValueError(f"{op}: argument '{name}': expected a 32-bit integer, got {n}")
    return n


def _flag(op: str, name: str, v: Any) -> bool:
    """v as a bool: Python's or numpy's bool scalar, nothing else (not 0/1, not None)."""
    if isinstance(v, bool):
        return v
    if type(v).__module__ == "numpy" and type(v).__name__ in ("bool", "bool_"):
        return bool(v)
    raise TypeError(f"{op}: argument '{name}': expected a bool, got {v!r}")


def _routing_args(op: str, mode: Any, renormalize: Any, n_group: Any, topk_group: Any,
                  scale: Any) -> tuple[str, bool, int, int, float]:
    """The routing settings as the extension takes them, each checked by type here (ranges in C++),
    so a wrong type names its argument instead of failing the binding's signature."""
    if not isinstance(mode, str):
        raise TypeError(f"{op}: argument 'mode': expected 'softmax_topk' or 'sigmoid_grouped_topk', got {mode!r}")
    flag = _flag(op, "renormalize", renormalize)
    groups = [_int32(op, name, v) for name, v in (("n_group", n_group), ("topk_group", topk_group))]
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"{op}: argument 'scale': expected a real number, got {scale!r}")
    return mode, flag, groups[0], groups[1], float(scale)


def _config(op: str, config: Any) -> dict[str, int]:
    """Kernel overrides as the extension takes them: a dict of str -> int (the CLI's --config)."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise TypeError(f"{op}: argument 'config': expected a dict of key -> integer, got {type(config).__name__}")
    for k, v in config.items():
        if not isinstance(k, str) or _integer(v) is None:  # not floats or strings
            raise TypeError(f"{op}: argument 'config': expected string keys and integer values, got {k!r}: {v!r}")
    return {k: _int32(op, f"config['{k}']", v) for k, v in config.items()}


def _is_torch(t: Tensor) -> bool:
    return type(t).__module__.startswith("torch")


def _dtype_name(t: Tensor) -> str:
    name = str(t.dtype)
    return name.split(".")[-1]  # torch.bfloat16 -> bfloat16, numpy float16 -> float16


def _empty(like: Tensor, shape: Sequence[int], dtype: str) -> Tensor:
    """A new tensor of the caller's kind, on `like`'s device."""
    if _is_torch(like):
        import torch

        # Any dtype a torch tensor has (the op then refuses a wrong one by name, as it does for
        # numpy); a name from out_dtype was checked against the op's list before.
        return torch.empty(tuple(shape), dtype=getattr(torch, dtype), device=like.device)
    import numpy as np

    if dtype == "bfloat16" or dtype.startswith("float8"):
        raise TypeError(f"tilecraft: numpy has no {dtype}; pass out= or use torch tensors")
    return np.empty(tuple(shape), dtype=dtype)


def _contiguous(t: Tensor) -> bool:
    return t.is_contiguous() if _is_torch(t) else bool(t.flags.c_contiguous)


def _stream(t: Tensor) -> int:
    """torch's current stream on t's device (0 for CPU tensors and numpy)."""
    if _is_torch(t) and t.is_cuda:
        import torch

        return torch.cuda.current_stream(t.device).cuda_stream
    return 0


def _experts(op: str, name: str, w: Tensor | Sequence[Tensor]) -> tuple[list, bool]:
    """One stacked tensor, or one tensor per expert."""
    if isinstance(w, (list, tuple)):
        if not w:
            raise ValueError(f"{op}: argument '{name}': expected one tensor per expert, got an empty list")
        return [_tensor(op, f"{name}[{i}]", t, 2) for i, t in enumerate(w)], False
    return [_tensor(op, name, w, 3)], True


def moe_reduce_fused(x: Tensor, token_topk_to_pos: Tensor, topk_weights: Tensor | None = None, *,
                     x_sf: Tensor | None = None, sf: Tensor | None = None, out: Tensor | None = None,
                     out_dtype: str | None = None, checked: bool = False) -> Tensor:
    """out[t] = sum_k topk_weights[t, k] * x[token_topk_to_pos[t, k]] (slots < 0 skipped), fp32
    accumulation in k order; optional per-row x_sf, fp8 output with global scale sf."""
    _tensor("moe_reduce_fused", "x", x, 2)
    T, _ = _tensor("moe_reduce_fused", "token_topk_to_pos", token_topk_to_pos, 2).shape
    _optional_tensors("moe_reduce_fused", topk_weights=topk_weights, x_sf=x_sf, sf=sf, out=out)
    out_dtype = _out_dtype("moe_reduce_fused", out_dtype, ("float32", "float16", "bfloat16", "float8_e4m3fn"))
    if out is None:
        out = _empty(x, (T, x.shape[1]), out_dtype or _dtype_name(x))
    _C.moe_reduce_fused(x, token_topk_to_pos, topk_weights, x_sf, sf, out, _flag("moe_reduce_fused", "checked", checked),
                        _stream(x))
    return out


_SCORE_DTYPES = {None: "fp32", "float32": "fp32", "fp32": "fp32", "float16": "fp16", "fp16": "fp16",
                 "bfloat16": "bf16", "bf16": "bf16"}


def _score_dtype(name: Any) -> str:
    key = str(name).replace("torch.", "") if name is not None else None
    if key not in _SCORE_DTYPES:
        raise ValueError(f"moe_topk_gate: argument 'score_dtype': expected None, 'float32', 'float16' or "
                         f"'bfloat16', got {name!r}")
    return _SCORE_DTYPES[key]


def moe_topk_gate(logits: Tensor, top_k: int, *, mode: str = "softmax_topk", renormalize: bool = False,
                  n_group: int = 1, topk_group: int = 1, scale: float = 1.0, bias: Tensor | None = None,
                  score_dtype: str | None = None, ids: Tensor | None = None,
                  weights: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Router logits [T, E] (fp32) -> (ids [T, K] int32, weights [T, K] fp32); ties to the smaller index.
    score_dtype 'float16' / 'bfloat16': logits and scores rounded to it first, as a PyTorch router in
    that dtype computes them (its ties then break the same way); None: exact fp32."""
    T, E = _tensor("moe_topk_gate", "logits", logits, 2).shape
    _optional_tensors("moe_topk_gate", bias=bias, ids=ids, weights=weights)
    top_k = _count("moe_topk_gate", "top_k", top_k, 1)
    if 1 <= E < top_k:  # (said here: the C++ check sees only the ids tensor made from it; E = 0 it names)
        raise ValueError(f"moe_topk_gate: argument 'top_k': expected 1..{E} (the logits' columns, one per "
                         f"expert), got {top_k}")
    ids = _empty(logits, (T, top_k), "int32") if ids is None else ids
    weights = _empty(logits, (T, top_k), "float32") if weights is None else weights
    routing = _routing_args("moe_topk_gate", mode, renormalize, n_group, topk_group, scale)
    _C.moe_topk_gate(logits, bias, ids, weights, *routing, _score_dtype(score_dtype), _stream(logits))
    return ids, weights


def moe_fused_mapping(ids: Tensor, num_experts: int, *, block_m: int = 1,
                      out: dict[str, Tensor] | None = None) -> dict[str, Tensor]:
    """Expert ids [T, K] -> the expert-major layout: tokens_per_expert, expert_offsets (each
    expert's rows padded to block_m), token_topk_to_pos, pos_to_token, tile_expert, num_tiles.
    `out` may hold any of these tensors to fill; the others are allocated."""
    T, K = _tensor("moe_fused_mapping", "ids", ids, 2).shape
    num_experts = _count("moe_fused_mapping", "num_experts", num_experts, 1)
    block_m = _count("moe_fused_mapping", "block_m", block_m, 1)
    rows = _C.mapping_rows(T, K, num_experts, block_m)
    shapes = {
        "tokens_per_expert": (num_experts,),
        "expert_offsets": (num_experts + 1,),
        "token_topk_to_pos": (T, K),
        "pos_to_token": (rows,),
        "tile_expert": (rows // block_m,),
        "num_tiles": (1,),
    }
    if out is not None and not isinstance(out, dict):
        raise TypeError(f"moe_fused_mapping: argument 'out': expected a dict of output name -> tensor, got "
                        f"{type(out).__name__}")
    given = dict(out or {})
    unknown = set(given) - set(shapes)
    if unknown:
        raise ValueError(f"moe_fused_mapping: argument 'out': unknown outputs {sorted(unknown)}; "
                         f"expected some of {sorted(shapes)}")
    _optional_tensors("moe_fused_mapping", **given)
    o = {k: given[k] if k in given else _empty(ids, s, "int32") for k, s in shapes.items()}
    _C.moe_fused_mapping(ids, o["tokens_per_expert"], o["expert_offsets"], o["token_topk_to_pos"],
                         o["pos_to_token"], o["tile_expert"], o["num_tiles"], num_experts, block_m, _stream(ids))
    return o


def moe_grouped_gemm(a: Tensor, w: Tensor | Sequence[Tensor], *, w_up: Tensor | Sequence[Tensor] | None = None,
                     layout: str = "nk", a_index: Tensor | None = None, tile_expert: Tensor | None = None,
                     num_tiles: Tensor | None = None, row_scale: Tensor | None = None,
                     row_token: Tensor | None = None, out: Tensor | None = None,
                     out_dtype: str | None = None, config: dict[str, int] | None = None) -> Tensor:
    """C[r] = A[a_index[r]] . W_e (silu(A.W) * (A.W_up) when w_up is given), e = tile_expert of
    row r's tile. w: stacked [E, N, K] ('nk') / [E, K, N] ('kn'), or a list of per-expert tensors.
    row_token: rows with a negative entry are padding and read zeros (for A in layout order, e.g.
    the mapping's pos_to_token).
    config: kernel overrides, as the CLI's --config (block_m, block_n, stages, sm90, tma, gemv,
    cluster, ...: an unknown key raises ValueError listing them all)."""
    _tensor("moe_grouped_gemm", "a", a, 2)
    ws, stacked = _experts("moe_grouped_gemm", "w", w)
    ups = _experts("moe_grouped_gemm", "w_up", w_up)[0] if w_up is not None else None
    if not isinstance(layout, str):
        raise TypeError(f"moe_grouped_gemm: argument 'layout': expected 'nk' or 'kn', got {layout!r}")
    first = ws[0]
    n = (first.shape[-2] if layout == "nk" else first.shape[-1])
    rows = _tensor("moe_grouped_gemm", "a_index", a_index, 1).shape[0] if a_index is not None else a.shape[0]
    _optional_tensors("moe_grouped_gemm", tile_expert=tile_expert, num_tiles=num_tiles, row_scale=row_scale,
                      row_token=row_token, out=out)
    out_dtype = _out_dtype("moe_grouped_gemm", out_dtype, ("float32", "float16", "bfloat16"))
    if out is None:
        out = _empty(a, (rows, n), out_dtype or _dtype_name(a))
    _C.moe_grouped_gemm(a, ws, stacked, ups, layout, a_index, tile_expert, num_tiles, row_scale, row_token, out,
                        _config("moe_grouped_gemm", config), _stream(a))
    return out


def fused_moe(x: Tensor, w_router: Tensor, w_gate: Tensor | Sequence[Tensor], w_up: Tensor | Sequence[Tensor],
              w_down: Tensor | Sequence[Tensor], top_k: int, *, mode: str = "softmax_topk",
              renormalize: bool = False, n_group: int = 1, topk_group: int = 1, scale: float = 1.0,
              bias: Tensor | None = None, layout: str = "nk", routing: tuple[Tensor, Tensor] | None = None,
              score_dtype: str | None = None,
              out: Tensor | None = None, ids: Tensor | None = None, weights: Tensor | None = None,
              workspace: "_C.Workspace | None" = None, config: dict[str, int] | None = None) -> Tensor:
    """The routed-experts MoE layer on x [..., H]. Weights per expert: 'nk' gate/up [I, H], down
    [H, I] (nn.Linear); 'kn' gate/up [H, I], down [I, H] (the race's), stacked or one tensor per
    expert. Stacked experts may lie apart: a fused gate/up w13 [E, 2I, H] goes in as the views
    w13[:, :I] and w13[:, I:], no copy. routing=(ids, weights) skips the router and gate. ids=/weights= receive the routing.
    score_dtype: see moe_topk_gate (the race's router runs in fp16: pass 'float16').
    config: overrides, as the CLI's --config for fused_moe: 'decode' (1 = the decode path, 0 =
    the mapped path), 'mapping_blocks', 'router_split', moe_grouped_gemm keys for both
    projections, or prefixed 'gate_up_' / 'down_' for one, 'router_' for the router GEMM (e.g.
    {'decode': 0, 'down_block_m': 16})."""
    if len(_tensor("fused_moe", "x", x).shape) < 1:
        raise ValueError("fused_moe: argument 'x': expected a tensor [..., H], got a 0-D tensor")
    _tensor("fused_moe", "w_router", w_router, 2)
    _optional_tensors("fused_moe", bias=bias, out=out, ids=ids, weights=weights)
    top_k = _count("fused_moe", "top_k", top_k, 1)
    lead = tuple(x.shape[:-1])
    H = x.shape[-1]
    T = 1
    for n in lead:
        T *= n
    x2 = x.reshape(T, H)  # not (-1, H): with H = 0 the -1 is ambiguous (the C++ then names H)
    if out is None:
        out = _empty(x, (T, H), _dtype_name(x))
    elif tuple(out.shape) not in (tuple(x.shape), (T, H)):
        raise ValueError(f"fused_moe: argument 'out': expected the shape of x {tuple(x.shape)} or {(T, H)}, got "
                         f"{tuple(out.shape)}")
    elif not _contiguous(out):
        raise ValueError("fused_moe: argument 'out': expected a contiguous tensor (results are written in place), "
                         f"got strides {tuple(out.strides) if not _is_torch(out) else out.stride()}")
    out2 = out.reshape(T, H)  # a view: out is contiguous
    g, stacked = _experts("fused_moe", "w_gate", w_gate)
    u, _ = _experts("fused_moe", "w_up", w_up)
    d, _ = _experts("fused_moe", "w_down", w_down)
    given = routing is not None
    if given:
        if not isinstance(routing, (tuple, list)) or len(routing) != 2:
            raise TypeError("fused_moe: argument 'routing': expected a pair (ids [T, K] int32, weights [T, K] "
                            f"float32), got {type(routing).__name__}")
        ids, weights = routing
    if not isinstance(layout, str):
        raise TypeError(f"fused_moe: argument 'layout': expected 'nk' or 'kn', got {layout!r}")
    if workspace is not None and not isinstance(workspace, _C.Workspace):
        raise TypeError(f"fused_moe: argument 'workspace': expected None or a tilecraft Workspace (FusedMoE keeps "
                        f"one), got {type(workspace).__name__}")
    mode, renormalize, n_group, topk_group, scale = _routing_args("fused_moe", mode, renormalize, n_group,
                                                                  topk_group, scale)
    _C.fused_moe(x2, w_router, g, u, d, stacked, layout, bias, out2, ids, weights, top_k, mode, renormalize,
                 n_group, topk_group, scale, _score_dtype(score_dtype), given, workspace, _config("fused_moe", config),
                 _stream(x))
    return out if tuple(out.shape) == tuple(x.shape) else out2.reshape(*lead, H)


class FusedMoE:
    """A layer object: weights and routing settings fixed, its workspace kept between calls
    (the `cached_e2e` scope of `tilecraft bench`). Keyword arguments (mode, renormalize, n_group,
    topk_group, scale, bias, score_dtype, config) are passed to every call of fused_moe."""

    def __init__(self, w_router: Tensor, w_gate: Tensor | Sequence[Tensor], w_up: Tensor | Sequence[Tensor],
                 w_down: Tensor | Sequence[Tensor], top_k: int, *, layout: str = "nk", **routing: Any) -> None:
        self.w_router, self.w_gate, self.w_up, self.w_down = w_router, w_gate, w_up, w_down
        self.top_k, self.layout, self.routing = top_k, layout, routing
        self.workspace = _C.Workspace()

    def __call__(self, x: Tensor, out: Tensor | None = None) -> Tensor:
        return fused_moe(x, self.w_router, self.w_gate, self.w_up, self.w_down, self.top_k, layout=self.layout,
                         out=out, workspace=self.workspace, **self.routing)
