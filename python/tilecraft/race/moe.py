"""tilecraft for the race's routed-MoE task (shared ops/fused_moe.md, "The race").

`custom_kernel(data)` takes the race's `data = (input, weights, config)`: input
fp16 [bs, seq, H]; weights a dict with `router.weight` [E, H] and, per expert
i, `experts.i.0.weight` (gate) and `experts.i.1.weight` (up) of shape [H, I]
and `experts.i.2.weight` (down) [I, H]; config a dict naming the top-k. The
whole layer runs through tilecraft: softmax top-k routing without
renormalisation, the grouped GEMMs reading every expert's weights where they
lie (per-expert pointers in their [K, N] layout: no transpose, no stack).
"""
from __future__ import annotations

import math
from typing import Any

from .. import fused_moe

_TOPK_KEYS = ("n_experts_per_token", "num_experts_per_tok", "top_k", "topk", "k")


def _top_k(config: dict) -> int:
    for key in _TOPK_KEYS:
        if key in config:
            return int(config[key])
    raise ValueError(f"tilecraft.race.moe: config names no top-k (looked for {', '.join(_TOPK_KEYS)}); "
                     f"got keys {sorted(config)}")


def _experts(weights: dict) -> int:
    n = 0
    while f"experts.{n}.0.weight" in weights:
        n += 1
    if n == 0:
        raise ValueError("tilecraft.race.moe: weights hold no 'experts.0.0.weight'; got keys "
                         f"{sorted(weights)[:6]}...")
    return n


def custom_kernel(data: tuple[Any, dict, dict]) -> Any:
    """The race's entry point: [bs, seq, H] fp16 out."""
    x, weights, config = data
    E = _experts(weights)
    router = weights["router.weight"]
    gate = [weights[f"experts.{i}.0.weight"] for i in range(E)]
    up = [weights[f"experts.{i}.1.weight"] for i in range(E)]
    down = [weights[f"experts.{i}.2.weight"] for i in range(E)]
    # The race's router is an fp16 nn.Linear and an fp16 softmax: round as it does, so
    # fp16 ties between experts break the same way as in its reference.
    return fused_moe(x, router, gate, up, down, _top_k(config), layout="kn", score_dtype=x.dtype)


# The protocol of `python -m tilecraft.race moe` (shared ops/fused_moe.md).
CASES = [
    {"kind": "functional", "d_hidden": 7168, "d_expert": 2048, "n_routed_experts": 8, "n_experts_per_token": 4,
     "batch_size": 1, "seq_len": 8192},
    {"kind": "functional", "d_hidden": 3584, "d_expert": 1024, "n_routed_experts": 4, "n_experts_per_token": 2,
     "batch_size": 2, "seq_len": 4096},
    {"kind": "performance", "d_hidden": 7168, "d_expert": 2048, "n_routed_experts": 8, "n_experts_per_token": 4,
     "batch_size": 4, "seq_len": 8192},
    {"kind": "performance", "d_hidden": 3584, "d_expert": 1024, "n_routed_experts": 4, "n_experts_per_token": 2,
     "batch_size": 8, "seq_len": 4096},
]


def generate_input(config: dict, seed: int, device: str = "cuda") -> tuple[Any, dict, dict]:
    """x ~ randn fp16 [bs, seq, H]; router randn/sqrt(H); gate, up randn/sqrt(I) [H, I]; down
    randn/sqrt(H) [I, H]; all from torch.manual_seed(seed)."""
    import torch

    H, I, E = config["d_hidden"], config["d_expert"], config["n_routed_experts"]
    g = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, device=device, dtype=torch.float32) * scale).half()

    x = randn(config["batch_size"], config["seq_len"], H)
    w = {"router.weight": randn(E, H, scale=1 / math.sqrt(H))}
    for i in range(E):
        w[f"experts.{i}.0.weight"] = randn(H, I, scale=1 / math.sqrt(I))
        w[f"experts.{i}.1.weight"] = randn(H, I, scale=1 / math.sqrt(I))
        w[f"experts.{i}.2.weight"] = randn(I, H, scale=1 / math.sqrt(H))
    return x, w, dict(config)


def reference_kernel(data: tuple[Any, dict, dict]) -> Any:
    """A plain PyTorch layer with the race's semantics: softmax top-k (not
    renormalised), per-expert gated MLP, weighted sum."""
    import torch

    x, weights, config = data
    bs, seq, H = x.shape
    E, K = _experts(weights), _top_k(config)
    flat = x.reshape(-1, H)
    probs = torch.softmax(flat @ weights["router.weight"].t(), dim=-1)  # fp16, as the race's MoEGate
    topv, topi = torch.topk(probs, K, dim=-1, sorted=False)
    topv = topv.float()
    out = torch.zeros(flat.shape, dtype=torch.float32, device=x.device)
    for e in range(E):
        tok, slot = torch.nonzero(topi == e, as_tuple=True)
        if tok.numel() == 0:
            continue
        xe = flat[tok]
        h = torch.nn.functional.silu(xe @ weights[f"experts.{e}.0.weight"]) * (xe @ weights[f"experts.{e}.1.weight"])
        y = (h @ weights[f"experts.{e}.2.weight"]).float()
        out.index_add_(0, tok, y * topv[tok, slot].unsqueeze(1))
    return out.half().reshape(bs, seq, H)


def clone_data(data):
    """Deep copy of every tensor, as the race does inside its timed region."""
    import torch

    if torch.is_tensor(data):
        return data.clone()
    if isinstance(data, dict):
        return {k: clone_data(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(clone_data(v) for v in data)
    return data


def time_ms(kernel, data, warmup: int = 10, repeat: int = 100) -> float:
    """The race's timing: `kernel(clone_data(data))` averaged over `repeat` calls
    between one pair of CUDA events after `warmup` calls, a final synchronize inside."""
    import torch

    for _ in range(warmup):
        kernel(clone_data(data))
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        kernel(clone_data(data))
    torch.cuda.synchronize()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeat


def check(out, want, atol: float = 1e-2, rtol: float = 1e-2) -> tuple[bool, str]:
    """The race's check: both cast to fp32, allclose(atol, rtol)."""
    import torch

    o, w = out.float(), want.float()
    ok = torch.allclose(o, w, atol=atol, rtol=rtol)
    bad = (~torch.isclose(o, w, atol=atol, rtol=rtol)).sum().item()
    return ok, f"max abs err {(o - w).abs().max().item():.4g}, {bad} of {o.numel()} outside atol=rtol={atol}"


class RoutedMoEKernel:
    """The race's kernel object, driven by the race's own `MoE` module: built
    with its constructor arguments, called with its 11 tensors. The module
    has already routed and grouped the tokens:

    input [group_sum, H] (rows grouped by expert, unpadded); gate, up
    [E, I, H] and down [E, H, I] stacked; routed_expert_weights [group_sum];
    group_sizes, group_offsets, group_padded_offsets [E] (offsets of each
    expert's rows unpadded and padded to block_token); group_idx_for_bx
    [blocks] (the expert of each block_token-row block); up_logits
    [group_sum, I] and output [group_sum, H] to fill, output row = route weight
    * down(silu(gate) * up).

    tilecraft runs its grouped GEMMs on the padded layout the metadata
    describes (A rows gathered by index, so `input` is read in place), then
    writes the valid rows of both results into the caller's buffers.
    """

    def __init__(self, d_hidden: int, d_expert: int, n_routed_experts: int, group_sum: int, group_count: int,
                 block_token: int = 128, block_dhidden: int = 128, block_dexpert: int = 128, threads: int = 256,
                 num_stages: int = 1, backend: str = "tilecraft", **_tuning: Any) -> None:
        if block_token not in (16, 32, 64, 128):
            raise ValueError(f"RoutedMoEKernel: block_token must be 16, 32, 64 or 128 for tilecraft, got {block_token}")
        self.d_hidden, self.d_expert, self.n_routed_experts = d_hidden, d_expert, n_routed_experts
        self.group_sum, self.group_count, self.block_token = group_sum, group_count, block_token

    def _rows(self, group_sizes, group_offsets, group_padded_offsets, group_idx_for_bx):
        """For every padded row: the grouped row it holds, or -1 (padding). On the device, no sync."""
        import torch

        bt = self.block_token
        r = torch.arange(group_idx_for_bx.shape[0] * bt, device=group_idx_for_bx.device, dtype=torch.int64)
        e = group_idx_for_bx.long()[r // bt]
        local = r - group_padded_offsets.long()[e]
        valid = (local >= 0) & (local < group_sizes.long()[e])
        return torch.where(valid, group_offsets.long()[e] + local, torch.full_like(r, -1)).to(torch.int32)

    def __call__(self, input, routed_expert_gate, routed_expert_up, routed_expert_down, routed_expert_weights,
                 group_sizes, group_offsets, group_padded_offsets, group_idx_for_bx, up_logits, output):
        import torch

        from .. import moe_grouped_gemm

        src = self._rows(group_sizes, group_offsets, group_padded_offsets, group_idx_for_bx)
        valid = src >= 0
        tiles = group_idx_for_bx.to(torch.int32).contiguous()
        h = moe_grouped_gemm(input, routed_expert_gate, w_up=routed_expert_up, a_index=src, tile_expert=tiles)
        scale = torch.where(valid, routed_expert_weights.float()[src.long().clamp(min=0)],
                            torch.zeros((), device=src.device))
        y = moe_grouped_gemm(h, routed_expert_down, tile_expert=tiles, row_scale=scale.contiguous())
        rows = src[valid].long()
        up_logits.index_copy_(0, rows, h[valid])
        output.index_copy_(0, rows, y[valid])
        return output
