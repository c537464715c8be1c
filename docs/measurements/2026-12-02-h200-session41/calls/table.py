#!/usr/bin/env python3
"""The closing note's table from a call's bench logs (race.log, model.log).

    python3 table.py callN/race.log callN/model.log

Per workload: the layer's median, its fraction of the same-run read ceiling,
the experts scope (routing given), kernel_only (both grouped GEMMs) in us and
TFLOP/s and as a fraction of the same-run cuBLAS GEMM ceiling, and the
per-expert cuBLAS loop (same FLOPs as kernel_only, no gather / silu / combine).
"""
import re
import sys

rows, gemm_ceiling = [], None
for path in sys.argv[1:]:
    cur = None
    for line in open(path):
        m = re.search(r"GEMM ([\d.]+) TFLOP/s", line)
        if m and "ceilings" in line:
            gemm_ceiling = float(m.group(1))
        m = re.match(r"\[\d+/\d+ [\d.]+s\] fused_moe/Default/(\S+) \[cuda\].* median ([\d.]+) us .*?([\d.]+)% read", line)
        if m:
            cur = {"w": m.group(1), "layer": float(m.group(2)), "read": float(m.group(3))}
            rows.append(cur)
            continue
        m = re.match(r"\s+(experts|kernel_only|cublas_per_expert|cublas_dense)\s+median\s+([\d.]+) us(?:\s+([\d.]+) TFLOP/s)?", line)
        if m and cur is not None:
            cur[m.group(1)] = float(m.group(2))
            if m.group(3):
                cur[m.group(1) + "_tf"] = float(m.group(3))
print(f"GEMM ceiling (same run): {gemm_ceiling} TFLOP/s\n")
print("| workload | layer us | layer % of read | experts us | kernel_only us | kernel_only TFLOP/s (% of GEMM ceiling) | cuBLAS loop us | kernel_only / loop |")
print("|---|---|---|---|---|---|---|---|")
for r in rows:
    ko, loop = r.get("kernel_only"), r.get("cublas_per_expert")
    tf = r.get("kernel_only_tf")
    frac = f"{tf:.1f} ({100 * tf / gemm_ceiling:.0f}%)" if tf and gemm_ceiling else "-"
    ratio = f"{ko / loop:.2f}" if ko and loop else "-"
    fmt = lambda v: f"{v:.1f}" if v is not None else "-"
    print(f"| {r['w']} | {fmt(r['layer'])} | {r['read']:.1f}% | {fmt(r.get('experts'))} | {fmt(ko)} | {frac} | {fmt(loop)} | {ratio} |")
