#!/usr/bin/env python3
"""Times PyTorch's grouped GEMM (torch._grouped_mm, CUTLASS inside) on uniform
groups, as a same-GPU peer for moe_grouped_gemm: E groups of R rows,
[E*R, K] x [E, K, N] -> [E*R, N], bf16, CUDA events, L2 flushed (a 256 MiB
write) before every timed call. Prints one line per shape:
  E R N K  median_us  TFLOP/s
Shapes: --shape E,R,N,K (repeatable). Exits 0 with a message where torch,
a GPU or torch._grouped_mm is missing.
"""
import argparse
import statistics
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", action="append", required=True, help="E,R,N,K")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("torch_grouped_mm_bench: torch is not installed; nothing timed")
        return 0
    if not torch.cuda.is_available() or not hasattr(torch, "_grouped_mm"):
        print("torch_grouped_mm_bench: needs a GPU and torch._grouped_mm; nothing timed")
        return 0
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for text in args.shape:
        E, R, N, K = (int(v) for v in text.split(","))
        gen = torch.Generator(device="cuda").manual_seed(20261202)
        a = torch.randn(E * R, K, device="cuda", dtype=torch.bfloat16, generator=gen)
        # [E, N, K] row-major seen as [E, K, N]: the layout the kernel takes.
        b = torch.randn(E, N, K, device="cuda", dtype=torch.bfloat16, generator=gen).transpose(-2, -1)
        offs = torch.arange(1, E + 1, device="cuda", dtype=torch.int32) * R
        out = torch._grouped_mm(a, b, offs=offs)
        ref = a[:R].float() @ b[0].float()  # first group against a dense product
        err = (out[:R].float() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
        times = []
        for _ in range(args.repeat + 2):
            flush.zero_()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch._grouped_mm(a, b, offs=offs)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e3)
        us = statistics.median(times[2:])
        print(f"{E} {R} {N} {K}  {us:.1f} us  {2.0 * E * R * N * K / us / 1e6:.1f} TFLOP/s  (first group rel err {err:.2e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
