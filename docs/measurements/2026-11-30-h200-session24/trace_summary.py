"""Summarises the per-CTA traces (TRACE lines printed by a kernel patched
with trace_instrument.py): for launches in the middle and near the end,
each event's min / avg / max over CTAs in us from the first CTA's start."""
import statistics as st
import sys

tag, n = sys.argv[2], int(sys.argv[3])
rows = [l.split() for l in open(sys.argv[1]) if l.startswith(tag + " ")]
launches = [rows[i:i + n] for i in range(0, len(rows) - n + 1, n)]
print(f"{sys.argv[1]}: {len(launches)} launches of {n} CTAs")
for li in (len(launches) // 2, len(launches) - 3):
    d = [dict(zip(r[1::2], map(int, r[2::2]))) for r in launches[li]]
    t0 = min(x["start"] for x in d)
    print(f" launch {li}")
    for k in [k for k in d[0] if k not in ("cta", "sm", "start")]:
        v = [(x[k] - t0) / 1000 for x in d]
        print(f"  {k:6s} min {min(v):7.1f} avg {st.mean(v):7.1f} max {max(v):7.1f}")
    slow = sorted(d, key=lambda x: -x["end"])[:5]
    print("  slowest:", " ".join(f"cta{x['cta']}:{(x['end'] - t0) / 1000:.0f}" for x in slow))
