#!/usr/bin/env python3
"""Per-SM view of `tilecraft bench --options release,trace` output.

    scripts/trace_by_sm.py LOG [--kernel REGEX] [--slot N] [--groups 3]
    scripts/trace_by_sm.py --self-test

The bench prints, after each traced kernel's slot summary, one line per CTA
of its last launch ("cta C sm S: slot=us ..."). This groups those lines by
SM: for the chosen slot (default: each kernel's highest stamped slot, e.g.
a CTA's end) it lists the SMs from earliest to latest, splits them into
`--groups` equal-count groups with their mean times, and names the SMs no
CTA ran on. Several LOGs (runs or models) are compared SM by SM: the rank
correlation says whether the same SMs are late in each, i.e. whether the
spread belongs to the SMs rather than to the work.
"""
import argparse
import re
import sys

KERNEL = re.compile(r"^\s+trace (.+?) \[(.*)\] \(its last launch")
CTA = re.compile(r"^\s+cta\s+(\d+) sm\s+(-?\d+):(.*)$")
STAMP = re.compile(r"(\d+)=(-?[\d.]+)")


def parse(lines):
    """[(kernel, config, {cta: (sm, {slot: us})})] in the order printed."""
    out = []
    for line in lines:
        m = KERNEL.match(line)
        if m:
            out.append((m.group(1), m.group(2), {}))
            continue
        m = CTA.match(line)
        if m and out:
            stamps = {int(s): float(v) for s, v in STAMP.findall(m.group(3))}
            out[-1][2][int(m.group(1))] = (int(m.group(2)), stamps)
    return out


def by_sm(ctas, slot):
    """{sm: time of `slot`} (the latest where an SM ran several CTAs)."""
    out = {}
    for sm, stamps in ctas.values():
        if slot in stamps:
            out[sm] = max(out.get(sm, stamps[slot]), stamps[slot])
    return out


def ranks(values):
    order = sorted(values, key=lambda k: values[k])
    return {k: i for i, k in enumerate(order)}


def rank_correlation(a, b):
    """Spearman's rho over the SMs in both (None below 3)."""
    common = [k for k in a if k in b]
    if len(common) < 3:
        return None
    ra, rb = ranks({k: a[k] for k in common}), ranks({k: b[k] for k in common})
    n = len(common)
    d2 = sum((ra[k] - rb[k]) ** 2 for k in common)
    return 1 - 6 * d2 / (n * (n * n - 1))


def report(kernels, pattern, slot, groups, name, out):
    views = []
    for kernel, config, ctas in kernels:
        if not re.search(pattern, kernel + " " + config):
            continue
        stamped = sorted({s for _, st in ctas.values() for s in st})
        if not stamped:
            continue
        use = slot if slot is not None else stamped[-1]
        t = by_sm(ctas, use)
        if not t:
            continue
        views.append(t)
        order = sorted(t, key=t.get)
        print(f"{name}: {kernel} [{config}] slot {use}: {len(t)} SMs, "
              f"{t[order[0]]:.2f} .. {t[order[-1]]:.2f} us", file=out)
        size = max(1, -(-len(order) // groups))
        for g in range(0, len(order), size):
            part = order[g:g + size]
            mean = sum(t[s] for s in part) / len(part)
            print(f"  mean {mean:8.2f} us: SMs {' '.join(map(str, sorted(part)))}", file=out)
        top = max(t) + 1
        idle = [s for s in range(top) if s not in t]
        if idle:
            print(f"  no CTA on SMs {' '.join(map(str, idle))} (of 0..{top - 1} seen)", file=out)
    return views


def self_test():
    log = """    trace &k<a, b> [cfg] (its last launch, us after slot 0's first stamp, 5 ns)
      slot  0:    4 CTAs  min 0 mean 0 max 0
      cta    0 sm   3: 0=0.00 2=10.00
      cta    1 sm   0: 0=0.10 2=20.00
      cta    2 sm   1: 0=0.20 2=15.00
      cta    3 sm   5: 0=0.30 1=1.00
    trace &other [x] (its last launch, us after slot 0's first stamp, 9 ns)
      cta    0 sm   0: 4=1.00
""".splitlines()
    ks = parse(log)
    assert [k[0] for k in ks] == ["&k<a, b>", "&other"], ks
    assert ks[0][2][1] == (0, {0: 0.1, 2: 20.0}), ks[0][2]
    assert by_sm(ks[0][2], 2) == {3: 10.0, 0: 20.0, 1: 15.0}
    import io
    buf = io.StringIO()
    views = report(ks, "&k", None, 3, "log", buf)
    text = buf.getvalue()
    assert "slot 2: 3 SMs, 10.00 .. 20.00 us" in text, text
    assert "mean    10.00 us: SMs 3" in text and "mean    20.00 us: SMs 0" in text, text
    assert "no CTA on SMs 2" in text, text
    assert len(views) == 1
    assert rank_correlation({0: 1, 1: 2, 2: 3}, {0: 5, 1: 6, 2: 7}) == 1
    assert rank_correlation({0: 1, 1: 2, 2: 3}, {0: 7, 1: 6, 2: 5}) == -1
    assert rank_correlation({0: 1, 1: 2}, {0: 1, 1: 2}) is None
    print("trace_by_sm self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="*")
    ap.add_argument("--kernel", default=".", help="regex on the kernel name and config (default: every kernel)")
    ap.add_argument("--slot", type=int, default=None, help="the slot to rank by (default: each kernel's last)")
    ap.add_argument("--groups", type=int, default=3)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    if not a.logs:
        ap.error("give at least one LOG (or --self-test)")
    firsts = []
    for path in a.logs:
        with open(path, encoding="utf-8", errors="replace") as f:
            views = report(parse(f), a.kernel, a.slot, max(1, a.groups), path, sys.stdout)
        if views:
            firsts.append((path, views[0]))
    for (pa, va), (pb, vb) in zip(firsts, firsts[1:]):
        rho = rank_correlation(va, vb)
        if rho is not None:
            print(f"rank correlation of the SMs' times, {pa} vs {pb}: {rho:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
