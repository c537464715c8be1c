#!/usr/bin/env python3
"""The hottest instructions of an Nsight Compute source page.

usage: ncu -i REPORT --page source --csv --print-source sass > page.csv
       scripts/ncu_source_top.py page.csv [N]

Prints the N (default 30) instructions with the most warp-stall samples,
each with its share of all samples and its two largest stall reasons, then
the samples summed per stall reason over the whole kernel. Column names
differ between ncu versions, so columns are found by what they contain.
"""
import csv
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top_n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with open(sys.argv[1], newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    # The header is the first row naming a stall-sampling column (ncu may
    # print a kernel title line before it).
    head_at = next((i for i, r in enumerate(rows) if any("Sampling" in c for c in r)), None)
    if head_at is None:
        sys.exit("no 'Warp Stall Sampling' column: was SourceCounters collected?")
    head, body = rows[head_at], rows[head_at + 1:]
    col = {name: i for i, name in enumerate(head)}
    total_col = next(i for i, c in enumerate(head) if "Sampling" in c and "Not" not in c)
    text_col = next((col[c] for c in ("Source", "Instruction", "SASS") if c in col), len(head) - 1)
    addr_col = next((col[c] for c in ("Address", "# Address") if c in col), 0)
    stall_cols = [i for i, c in enumerate(head) if c.startswith("stall_") or c.lower().startswith("stall ")]
    body = [r for r in body if len(r) == len(head)]
    total = sum(number(r[total_col]) for r in body) or 1.0
    print(f"{len(body)} instructions, {total:.0f} samples ({head[total_col]})")
    for r in sorted(body, key=lambda r: -number(r[total_col]))[:top_n]:
        reasons = sorted(((number(r[i]), head[i]) for i in stall_cols), reverse=True)[:2]
        why = ", ".join(f"{name} {v:.0f}" for v, name in reasons if v > 0)
        print(f"{100 * number(r[total_col]) / total:5.1f}%  {r[addr_col]:>6}  {r[text_col][:70]:<70}  {why}")
    if stall_cols:
        print("\nsamples per stall reason, whole kernel:")
        sums = sorted(((sum(number(r[i]) for r in body), head[i]) for i in stall_cols), reverse=True)
        for v, name in sums[:12]:
            if v > 0:
                print(f"  {100 * v / total:5.1f}%  {name}")


if __name__ == "__main__":
    main()
