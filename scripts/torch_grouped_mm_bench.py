#!/usr/bin/env python3
"""Times PyTorch's grouped GEMM (torch._grouped_mm, CUTLASS inside) on uniform
groups, as a same-GPU peer for moe_grouped_gemm: E groups of R rows,
[E*R, K] x [E, K, N] -> [E*R, N], CUDA events, L2 flushed (a 256 MiB write)
before every timed call. With --tilecraft, tilecraft.moe_grouped_gemm runs
the same problem on the same tensors (A in layout order, weights stacked
[E, N, K], plain store), its calls alternating with torch's so both see the
same clock and power state; its result is checked against torch's (and
with --gated the layer's gate/up form of the same FLOPs, as a third side).
--config passes tilecraft kernel overrides (e.g. cluster=2,multicast=1). With
--energy-ms, each side also runs alone, back to back, for that long and the
board's energy counter (NVML) gives joules per call: at the power cap a
kernel's time follows its energy. Prints one line per shape and side:
  E R N K side  median_us  TFLOP/s  [mJ/call  W]
Shapes: --shape E,R,N,K (repeatable). --data randn (unit normal A and W) or
uniform (tilecraft's bench: A in [-1, 1], W in +-sqrt(3 / K)). Exits 0 with
a message where torch, a GPU or torch._grouped_mm is missing.
"""
import argparse
import ctypes
import statistics
import sys
import time


class Nvml:
    """The board's total-energy counter (mJ) through libnvidia-ml, or None."""

    def __init__(self):
        self.lib = self.dev = None
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            dev = ctypes.c_void_p()
            if lib.nvmlInit_v2() == 0 and lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)) == 0:
                self.lib, self.dev = lib, dev
        except OSError:
            pass

    def millijoules(self):
        v = ctypes.c_ulonglong()
        if self.lib is None or self.lib.nvmlDeviceGetTotalEnergyConsumption(self.dev, ctypes.byref(v)) != 0:
            return None
        return v.value


def energy_per_call(torch, nvml, fn, ms):
    """Runs fn back to back for at least ms of wall time; (mJ per call, W, us per call)."""
    torch.cuda.synchronize()
    e0, t0, n = nvml.millijoules(), time.perf_counter(), 0
    while True:
        for _ in range(20):
            fn()
        n += 20
        torch.cuda.synchronize()
        if (time.perf_counter() - t0) * 1e3 >= ms:
            break
    e1, t1 = nvml.millijoules(), time.perf_counter()
    if e0 is None or e1 is None:
        return None
    return (e1 - e0) / n, (e1 - e0) / 1e3 / (t1 - t0), (t1 - t0) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", action="append", required=True, help="E,R,N,K")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--data", choices=["randn", "uniform"], default="randn")
    ap.add_argument("--tilecraft", action="store_true", help="also time tilecraft.moe_grouped_gemm, alternating")
    ap.add_argument("--config", default="", help="tilecraft config overrides, k=v[,k=v]")
    ap.add_argument("--gated", action="store_true",
                    help="with --tilecraft, also the layer's gate/up form of the same FLOPs: A rows gathered "
                         "through a permutation, W split in halves [E, N/2, K], silu(gate) * up stored (N/2 columns)")
    ap.add_argument("--energy-ms", type=float, default=0.0)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("torch_grouped_mm_bench: torch is not installed; nothing timed")
        return 0
    if not torch.cuda.is_available() or not hasattr(torch, "_grouped_mm"):
        print("torch_grouped_mm_bench: needs a GPU and torch._grouped_mm; nothing timed")
        return 0
    tc = None
    if args.tilecraft:
        import tilecraft as tc
    config = {k: int(v) for k, v in (kv.split("=") for kv in args.config.split(",") if kv)}
    nvml = Nvml() if args.energy_ms > 0 else None
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for text in args.shape:
        E, R, N, K = (int(v) for v in text.split(","))
        gen = torch.Generator(device="cuda").manual_seed(20261202)
        a = torch.randn(E * R, K, device="cuda", dtype=torch.bfloat16, generator=gen)
        w = torch.randn(E, N, K, device="cuda", dtype=torch.bfloat16, generator=gen)  # [E, N, K]
        if args.data == "uniform":
            a = (torch.rand(E * R, K, device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16)
            s = (3.0 / K) ** 0.5
            w = ((torch.rand(E, N, K, device="cuda", generator=gen) * 2 - 1) * s).to(torch.bfloat16)
        b = w.transpose(-2, -1)  # [E, K, N] view: the layout torch's kernel takes
        offs = torch.arange(1, E + 1, device="cuda", dtype=torch.int32) * R
        sides = {"torch": lambda: torch._grouped_mm(a, b, offs=offs)}
        if tc is not None:
            bm = config.get("block_m", 128)
            if R % bm:
                print(f"{text}: tilecraft side needs R a multiple of block_m {bm}; skipped")
            else:
                tiles = E * R // bm
                tile_expert = (torch.arange(tiles, device="cuda", dtype=torch.int32) // (R // bm)).to(torch.int32)
                num_tiles = torch.tensor([tiles], device="cuda", dtype=torch.int32)
                out = torch.empty(E * R, N, device="cuda", dtype=torch.bfloat16)
                cfg = dict(config, block_m=bm)
                sides["tilecraft"] = lambda: tc.moe_grouped_gemm(a, w, tile_expert=tile_expert, num_tiles=num_tiles,
                                                                 out=out, config=cfg)
                if args.gated:
                    # Three A-row forms of the same gated GEMM: rows gathered through a
                    # random permutation (the layer's gather), through the identity (the
                    # same loads in order), and A in layout order (no index: A by TMA).
                    wg, wu = w[:, : N // 2].contiguous(), w[:, N // 2 :].contiguous()
                    perm = torch.randperm(E * R, device="cuda", generator=gen).to(torch.int32)
                    ident = torch.arange(E * R, device="cuda", dtype=torch.int32)
                    out_g = torch.empty(E * R, N // 2, device="cuda", dtype=torch.bfloat16)
                    gated_index = {"gated": perm, "gated-seq": ident, "gated-tma": None}
                    for name, index in gated_index.items():
                        sides[name] = (lambda index=index: tc.moe_grouped_gemm(
                            a, wg, w_up=wu, a_index=index, tile_expert=tile_expert, num_tiles=num_tiles,
                            out=out_g, config=cfg))
        want = sides["torch"]().float()
        for name, fn in sides.items():
            got = fn().float()
            if name.startswith("gated"):
                # The first group against its own product: rows A[index[r]], expert 0's weights.
                index = gated_index[name]
                rows = a[index[:R].long()] if index is not None else a[:R]
                g = rows.float() @ w[0].float().T
                ref = torch.nn.functional.silu(g[:, : N // 2].to(torch.bfloat16).float()) * \
                    g[:, N // 2 :].to(torch.bfloat16).float()
                err = (got[:R] - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
                print(f"{E} {R} {N} {K} {name}: first group max |diff| / max |reference| = {err:.2e}")
                continue
            err = (got - want).abs().max().item() / max(want.abs().max().item(), 1e-30)
            print(f"{E} {R} {N} {K} {name}: max |diff| / max |torch| = {err:.2e}")
        times = {name: [] for name in sides}
        for _ in range(args.repeat + 2):
            for name, fn in sides.items():
                flush.zero_()
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                stop.record()
                stop.synchronize()
                times[name].append(start.elapsed_time(stop) * 1e3)
        for name in sides:
            us = statistics.median(times[name][2:])
            line = f"{E} {R} {N} {K} {name:9s} {us:9.1f} us  {2.0 * E * R * N * K / us / 1e6:6.1f} TFLOP/s"
            if nvml is not None:
                got = energy_per_call(torch, nvml, sides[name], args.energy_ms)
                line += "  (no energy counter)" if got is None else \
                    f"  back to back: {got[0]:.1f} mJ/call, {got[1]:.0f} W, {got[2]:.1f} us/call"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
