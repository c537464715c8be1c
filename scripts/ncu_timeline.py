#!/usr/bin/env python3
"""PM-sampling timelines from an Nsight Compute raw page.

usage: ncu -i REPORT --page raw --csv --print-metric-instances values > raw.csv
       scripts/ncu_timeline.py raw.csv [BUCKETS]

For each profiled kernel (one CSV row each), prints its name and duration,
then every sampled metric (a column holding a list of values) averaged into
BUCKETS (default 32) equal slices of its samples, one line per metric. The
raw page's layout differs between ncu versions, so list cells are found by
their separators rather than by name.
"""
import csv
import re
import sys


def numbers(cell):
    parts = [p for p in re.split(r"[;,\s]+", cell.strip()) if p]
    out = []
    for p in parts:
        try:
            out.append(float(p))
        except ValueError:
            return []
    return out


def buckets(values, n):
    if len(values) <= n:
        return values
    out = []
    for b in range(n):
        lo, hi = b * len(values) // n, (b + 1) * len(values) // n
        out.append(sum(values[lo:hi]) / max(hi - lo, 1))
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    with open(sys.argv[1], newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    header = next((r for r in rows if "Kernel Name" in r), None)
    if header is None:
        sys.exit("no header row naming 'Kernel Name'")
    start = rows.index(header) + 1
    units = rows[start] if start < len(rows) else []
    name_col = header.index("Kernel Name")
    dur_col = next((i for i, h in enumerate(header) if h.startswith("gpu__time_duration.sum")), None)
    for row in rows[start + 1:]:
        if len(row) != len(header):
            continue
        dur = f"{row[dur_col]} {units[dur_col] if dur_col < len(units) else ''}" if dur_col is not None else "?"
        print(f"== {row[name_col][:90]}  duration {dur}")
        for i, cell in enumerate(row):
            vals = numbers(cell)
            if len(vals) < 4:
                continue
            b = buckets(vals, n)
            scale = max(max(abs(v) for v in b), 1e-30)
            print(f"  {header[i][:70]} [{units[i] if i < len(units) else ''}] samples {len(vals)} max {scale:.4g}")
            print("    " + " ".join(f"{v:.3g}" for v in b))


if __name__ == "__main__":
    main()
