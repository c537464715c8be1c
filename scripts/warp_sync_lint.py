#!/usr/bin/env python3
"""Warp collectives inside loops whose trip count differs between lanes.

A full-mask warp collective (__shfl_sync(0xffffffff, ...), __ballot_sync,
__syncwarp(), ...) needs every lane of the warp to reach it. A loop that
starts at the lane's index (`for (int c = lane; c < n; c += 32)`) runs a
different number of trips on different lanes wherever n is not a multiple
of its step, so a collective inside it, directly or in a function it calls,
waits forever for the lanes that left. That is how the fused combine hung
where H / 8 was not a multiple of 32 (sessions 43-45); such loops must take
warp-uniform trips (`for (base = 0; base < n; base += 32) { c = base + lane;
... }`, predicating the loads and stores instead).

This reads the kernel sources as text (no GPU, no compiler): functions whose
bodies hold a full-mask collective, then every function that calls one of
them, then every `for` loop whose first clause names `lane` or `threadIdx`
and whose body holds a collective or calls such a function. A loop that is
warp-uniform for a reason the text cannot show is waived by a comment
`warp-uniform:` on the line of its `for`, saying why.

  python3 scripts/warp_sync_lint.py [KERNELS_DIR]   # exit 1 on a finding
  python3 scripts/warp_sync_lint.py --self-test      # the check itself
"""
import pathlib
import re
import sys

COLLECTIVE = re.compile(
    r"__(?:shfl(?:_xor|_up|_down)?|ballot|all|any|match_any|match_all|reduce_\w+)_sync\s*\(|__syncwarp\s*\(")
FOR = re.compile(r"\bfor\s*\(")
LANE_INIT = re.compile(r"\blane\b|threadIdx")
WAIVER = "warp-uniform:"


def strip_comments(src):
    """Comments and string literals blanked, line structure kept; waivers
    survive as a marker token so the loop check can see them."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" __waived__ " if WAIVER in src[i:j] else " ")
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * src.count("\n", i, j))
            i = j
        elif src[i] == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""')
            i = j + 1
        else:
            out.append(src[i])
            i += 1
    return "".join(out)


def matching(src, i, open_ch, close_ch):
    """Index just past the bracket that closes the one at src[i]."""
    depth = 0
    for k in range(i, len(src)):
        if src[k] == open_ch:
            depth += 1
        elif src[k] == close_ch:
            depth -= 1
            if depth == 0:
                return k + 1
    return len(src)


def functions(src):
    """(name, body) of every __device__ function defined in src."""
    for m in re.finditer(r"__device__\b", src):
        brace = src.find("{", m.end())
        head = src[m.end():brace]
        if brace < 0 or ";" in head or "(" not in head:  # a declaration or a variable
            continue
        name = re.findall(r"(\w+)\s*\(", head)
        if name:
            yield name[0], src[brace:matching(src, brace, "{", "}")]


def calls(body, names):
    return [n for n in names if re.search(r"\b%s\s*(?:<[^;(){}]*>)?\s*\(" % re.escape(n), body)]


def syncing_functions(sources):
    bodies = {}
    for src in sources.values():
        for name, body in functions(src):
            bodies.setdefault(name, []).append(body)
    sync = {n for n, bs in bodies.items() if any(COLLECTIVE.search(b) for b in bs)}
    while True:  # callers of syncing functions sync too
        more = {n for n, bs in bodies.items() if n not in sync and any(calls(b, sync) for b in bs)}
        if not more:
            return sync
        sync |= more


def loop_findings(path, src, sync):
    found = []
    for m in FOR.finditer(src):
        head_end = matching(src, m.end() - 1, "(", ")")
        init = src[m.end():head_end].split(";")[0]
        if not LANE_INIT.search(init):
            continue
        line_start = src.rfind("\n", 0, m.start()) + 1
        line_end = src.find("\n", m.start())
        if "__waived__" in src[line_start:line_end]:
            continue
        k = head_end
        while k < len(src) and src[k].isspace():
            k += 1
        body = src[k:matching(src, k, "{", "}")] if src[k:k + 1] == "{" else src[k:src.find(";", k) + 1]
        why = ["a collective"] if COLLECTIVE.search(body) else calls(body, sync)
        if why:
            line = src.count("\n", 0, m.start()) + 1
            found.append(f"{path}:{line}: a loop starting at the lane's index reaches "
                         f"{', '.join(why)} (a full-mask warp collective); lanes that leave it early "
                         f"never arrive: take warp-uniform trips")
    return found


def lint(sources):
    sync = syncing_functions(sources)
    out = []
    for path, src in sorted(sources.items()):
        out += loop_findings(path, src, sync)
    return out


def self_test():
    helper = """
    template <int U> static __device__ __forceinline__ void add(float* a, int lane) {
      a[0] += __shfl_sync(0xffffffffu, a[0], lane ^ 1);
    }
    static __device__ void outer(float* a, int lane) { add<2>(a, lane); }
    """
    cases = {
        "per-lane loop calling a syncing template": (
            "static __device__ void f(float* a) { const int lane = threadIdx.x & 31;\n"
            "  for (int c = lane; c < 83; c += 32) { add<2>(a, lane); } }", 1),
        "per-lane loop reaching it through a caller": (
            "static __device__ void f(float* a) { int lane = 0;\n"
            "  for (int c = lane; c < 83; c += 32) outer(a, lane); }", 1),
        "per-lane loop with a ballot in it": (
            "static __device__ void f() { for (int c = threadIdx.x; c < 7; c += 32) { __ballot_sync(0xffffffffu, 1); } }", 1),
        "warp-uniform trips": (
            "static __device__ void f(float* a) { int lane = 0;\n"
            "  for (int b = 0; b < 83; b += 32) { const int c = b + lane; add<2>(a, lane); } }", 0),
        "per-lane loop without collectives": (
            "static __device__ void f(float* a) { int lane = 0;\n"
            "  for (int c = lane; c < 83; c += 32) a[c] = 0.f; }", 0),
        "waived": (
            "static __device__ void f(float* a) { int lane = 0;\n"
            "  for (int c = lane; c < 64; c += 32) {  // warp-uniform: 64 is a multiple of 32\n"
            "    add<2>(a, lane); } }", 0),
        "collective in a comment only": (
            "static __device__ void f(float* a) { int lane = 0;\n"
            "  for (int c = lane; c < 83; c += 32) { a[c] = 0.f; /* __syncwarp() */ } }", 0),
    }
    bad = 0
    for what, (code, want) in cases.items():
        got = len(lint({"helper.cuh": strip_comments(helper), "case.cuh": strip_comments(code)}))
        if got != want:
            print(f"self-test: {what}: expected {want} finding(s), got {got}")
            bad += 1
    print(f"self-test: {len(cases) - bad} of {len(cases)} cases as expected")
    return 1 if bad else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).resolve().parent.parent / "kernels")
    files = sorted(p for p in root.rglob("*") if p.suffix in (".cuh", ".cu", ".h"))
    if not files:
        print(f"warp_sync_lint: no kernel sources under {root}")
        return 2
    sources = {str(p.relative_to(root)): strip_comments(p.read_text()) for p in files}
    found = lint(sources)
    for f in found:
        print(f)
    print(f"warp_sync_lint: {len(files)} files, {len(found)} finding(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
