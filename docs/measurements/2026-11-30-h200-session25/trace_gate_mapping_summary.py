"""Summarises GMTRACE lines (trace_gate_mapping*.py): launches are split at
each last-block line; per launch, us from the earliest block's dependency
wait end (d) to each event (min-max over blocks), and the last block's
phases. A one-block launch prints one line."""
import sys

launch, out = [], []
for line in open(sys.argv[1]):
    if not line.startswith("GMTRACE "):
        continue
    f = line.split()[1:]
    r = dict(zip(f[0::2], map(int, f[1::2])))
    launch.append(r)
    if r["last"] == 1:
        out.append(launch)
        launch = []
print(f"{len(out)} launches")
for i, L in enumerate(out):
    t0 = min(r["d"] for r in L)
    us = lambda v: (v - t0) / 1000
    line = f"launch {i:3d} blocks {len(L):3d}"
    for k in [k for k in L[0] if k not in ("blk", "last", "e", "d")]:
        v = [us(r[k]) for r in L if r.get(k, 0) > 0]
        if v:
            line += f" {k} {min(v):5.1f}-{max(v):5.1f}"
    last = L[-1]
    line += " | last: " + " ".join(f"{k} {us(last[k]):5.1f}" for k in ("acq", "ld", "cnt", "scan", "place", "end") if k in last)
    print(line)
