#!/usr/bin/env python3
"""Barriers inside loops whose trip count differs between the threads that
must meet there.

A full-mask warp collective (__shfl_sync(0xffffffff, ...), __ballot_sync,
__syncwarp(), ...) needs every lane of the warp to reach it; a block
barrier (__syncthreads(), `bar.sync` / `barrier.sync` in asm, a cluster
barrier) needs every thread it counts. A loop that starts at the thread's or
lane's index (`for (int c = lane; c < n; c += 32)`) runs a different number
of trips on different lanes wherever n is not a multiple of its step, so a
collective inside it, directly or in a function it calls, waits forever for
the lanes that left. That is how the fused combine hung where H / 8 was not
a multiple of 32 (sessions 43-45); such loops must take warp-uniform trips
(`for (base = 0; base < n; base += 32) { c = base + lane; ... }`,
predicating the loads and stores instead). A loop that starts at the warp's
index runs the same trips on a warp's lanes (warp collectives are fine in
it) but not on every warp of the block: a block barrier in it hangs the same
way.

This reads the kernel sources as text (no GPU, no compiler): functions whose
bodies hold a collective or a barrier, then every function that calls one
of them, then every `for` loop whose first clause names a thread or lane
index (`lane`, `tid`, `threadIdx`) or a warp index (`warp`), and whose body
holds what those threads cannot all reach, or calls a function that does. A
loop that is uniform for a reason the text cannot show is waived by a
comment `warp-uniform:` (or `block-uniform:`) on the line of its `for`,
saying why.

  python3 scripts/sync_lint.py [KERNELS_DIR]   # exit 1 on a finding
  python3 scripts/sync_lint.py --self-test      # the check itself
"""
import pathlib
import re
import sys

COLLECTIVE = re.compile(
    r"__(?:shfl(?:_xor|_up|_down)?|ballot|all|any|match_any|match_all|reduce_\w+)_sync\s*\(|__syncwarp\s*\(")
# Block barriers; asm strings that hold one survive comment stripping as
# the token __block_barrier__ (every other string literal is blanked).
BARRIER_ASM = re.compile(r"\b(?:bar|barrier)\.sync\b|\bbarrier\.cluster\.wait\b")
BARRIER = re.compile(r"__syncthreads\w*\s*\(|__block_barrier__")
FOR = re.compile(r"\bfor\s*\(")
THREAD_INIT = re.compile(r"\blane\b|\btid\b|threadIdx")
WARP_INIT = re.compile(r"\bwarp\b")
WAIVERS = ("warp-uniform:", "block-uniform:")


def strip_comments(src):
    """Comments and string literals blanked, line structure kept; waivers
    survive as a marker token so the loop check can see them."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" __waived__ " if any(w in src[i:j] for w in WAIVERS) else " ")
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
            out.append('"__block_barrier__"' if BARRIER_ASM.search(src[i:j]) else '""')
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


def syncing_functions(sources, pattern):
    """Names of the functions whose bodies match pattern, directly or
    through a function they call."""
    bodies = {}
    for src in sources.values():
        for name, body in functions(src):
            bodies.setdefault(name, []).append(body)
    sync = {n for n, bs in bodies.items() if any(pattern.search(b) for b in bs)}
    while True:  # callers of syncing functions sync too
        more = {n for n, bs in bodies.items() if n not in sync and any(calls(b, sync) for b in bs)}
        if not more:
            return sync
        sync |= more


def loop_body(src, k):
    while k < len(src) and src[k].isspace():
        k += 1
    return src[k:matching(src, k, "{", "}")] if src[k:k + 1] == "{" else src[k:src.find(";", k) + 1]


def loop_findings(path, src, warp_sync, block_sync):
    found = []
    for m in FOR.finditer(src):
        head_end = matching(src, m.end() - 1, "(", ")")
        init = src[m.end():head_end].split(";")[0]
        per_thread, per_warp = THREAD_INIT.search(init), WARP_INIT.search(init)
        if not per_thread and not per_warp:
            continue
        line_start = src.rfind("\n", 0, m.start()) + 1
        line_end = src.find("\n", m.start())
        if "__waived__" in src[line_start:line_end]:
            continue
        body = loop_body(src, head_end)
        why = ["a block barrier"] if BARRIER.search(body) else calls(body, block_sync)
        what, who = "a block barrier", "the warp's" if per_warp and not per_thread else "the lane's"
        if not why and per_thread:
            why = ["a collective"] if COLLECTIVE.search(body) else calls(body, warp_sync)
            what = "a full-mask warp collective"
        if why:
            line = src.count("\n", 0, m.start()) + 1
            found.append(f"{path}:{line}: a loop starting at {who} index reaches {', '.join(why)} ({what}); "
                         f"threads that leave it early never arrive: take uniform trips")
    return found


def lint(sources):
    warp_sync = syncing_functions(sources, COLLECTIVE)
    block_sync = syncing_functions(sources, BARRIER)
    out = []
    for path, src in sorted(sources.items()):
        out += loop_findings(path, src, warp_sync, block_sync)
    return out


def self_test():
    helper = """
    template <int U> static __device__ __forceinline__ void add(float* a, int lane) {
      a[0] += __shfl_sync(0xffffffffu, a[0], lane ^ 1);
    }
    static __device__ void outer(float* a, int lane) { add<2>(a, lane); }
    static __device__ void wait_half(int id) { asm volatile("bar.sync %0, 64;" ::"r"(id) : "memory"); }
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
        "per-thread loop with __syncthreads in it": (
            "static __device__ void f(float* s) { const int tid = threadIdx.x;\n"
            "  for (int i = tid; i < 300; i += 256) { s[i] = 0.f; __syncthreads(); } }", 1),
        "per-warp loop reaching a named barrier in asm": (
            "static __device__ void f(float* s) { const int warp = threadIdx.x / 32;\n"
            "  for (int w = warp; w < 5; w += 4) { wait_half(1); } }", 1),
        "per-warp loop with warp collectives only": (
            "static __device__ void f(float* a) { const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;\n"
            "  for (int w = warp; w < 5; w += 4) { add<2>(a, lane); } }", 0),
        "barrier after a per-thread loop": (
            "static __device__ void f(float* s) { const int tid = threadIdx.x;\n"
            "  for (int i = tid; i < 300; i += 256) s[i] = 0.f;\n  __syncthreads(); }", 0),
        "block-uniform waiver": (
            "static __device__ void f(float* s) { const int warp = threadIdx.x / 32;\n"
            "  for (int w = warp; w < 8; w += 4) {  // block-uniform: 8 warps' work on 4 warps\n"
            "    __syncthreads(); } }", 0),
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
        print(f"sync_lint: no kernel sources under {root}")
        return 2
    sources = {str(p.relative_to(root)): strip_comments(p.read_text()) for p in files}
    found = lint(sources)
    for f in found:
        print(f)
    print(f"sync_lint: {len(files)} files, {len(found)} finding(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
