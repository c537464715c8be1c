#!/usr/bin/env python3
"""Tail of each traced warp-specialised GEMM in a `bench --options trace` log:
per CTA, its end (the later of its consumer warpgroups' last stamps, slots 6
and 9) and its last tile's start (slots 5 and 8), in us after slot 0's first
stamp. Prints the spread of the ends and the SM-time idle between a CTA's end
and the kernel's last end, as a fraction of the kernel's SM-time."""
import re
import sys

head = re.compile(r"^\s+trace (.+?) \[([^\]]*)\] \(its last launch")
cta = re.compile(r"^\s+cta\s+(\d+) sm\s+(\d+):(.*)$")

def report(name, ctas):
    if not ctas:
        return
    ends, lasts, starts = [], [], []
    for slots in ctas:
        e = [slots[s] for s in (6, 9) if s in slots]
        l = [slots[s] for s in (5, 8) if s in slots]
        if not e:
            continue
        ends.append(max(e))
        lasts.append(max(l) if l else float("nan"))
        starts.append(slots.get(1, slots.get(0, 0.0)))
    if not ends:
        return
    t_end, t0 = max(ends), min(starts)
    span = t_end - t0
    idle = sum(t_end - e for e in ends) / (len(ends) * span) if span > 0 else 0.0
    ends_sorted = sorted(ends)
    q = lambda f: ends_sorted[min(len(ends_sorted) - 1, int(f * len(ends_sorted)))]
    print(f"{name}\n  ctas {len(ends)}  span {span:.1f} us  ends: min {ends_sorted[0]:.1f}  p10 {q(0.1):.1f}  "
          f"p50 {q(0.5):.1f}  p90 {q(0.9):.1f}  max {t_end:.1f}  tail idle {100 * idle:.2f}% of SM-time  "
          f"last tile starts max {max(lasts):.1f}")

name, ctas = None, []
for line in open(sys.argv[1], errors="replace"):
    m = head.match(line)
    if m:
        if name:
            report(name, ctas)
        name, ctas = f"{m.group(1)} [{m.group(2)[:90]}]", []
        continue
    m = cta.match(line)
    if m and name:
        slots = {}
        for kv in m.group(3).split():
            k, v = kv.split("=")
            slots[int(k)] = float(v)
        ctas.append(slots)
if name:
    report(name, ctas)
