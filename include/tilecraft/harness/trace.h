#pragma once
// Per-CTA phase stamps of traced kernels (compile option `trace`), summarised
// per slot: how many CTAs stamped it, and when (min / mean / max), in us
// after the earliest stamp of the origin slot over all CTAs.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tilecraft/jit/jit.h"

namespace tilecraft::harness {

struct TraceSlotStats {
  int slot = 0;
  int ctas = 0;  // CTAs that stamped it
  double min_us = 0, mean_us = 0, max_us = 0;
};

// Slots with at least one stamp, in slot order, of the last launch only (the
// launch of the latest stamp, where t.grids names launches: a slot stamped
// by one CTA per launch would otherwise mix launches). The origin is slot
// `origin`'s earliest stamp, or the earliest stamp of all where that slot
// has none.
std::vector<TraceSlotStats> summarize_trace(const jit::KernelTrace& t, int origin = 0);
// One CTA of the last launch: the SM it ran on (-1: unknown) and its stamped
// slots with their times (us after the origin, as summarize_trace).
struct TraceCta {
  int cta = 0, sm = -1;
  std::vector<int> slots;
  std::vector<double> us;
};
// The origin's %globaltimer value in ns (0: no stamps): kernels of one
// stream share the clock, so origins place their launches on one timeline.
unsigned long long trace_origin_ns(const jit::KernelTrace& t, int origin = 0);
// The CTAs of the last launch that stamped anything, in CTA order.
std::vector<TraceCta> trace_ctas(const jit::KernelTrace& t, int origin = 0);
// A few lines: the kernel, then one line per stamped slot; with per_cta,
// then one line per CTA (its SM and stamps: which SMs run late).
std::string format_trace(const jit::KernelTrace& t, bool per_cta = false);
// For the records: {"function", "config", "origin_ns", "slots": [{"slot", "ctas",
// "min_us", "mean_us", "max_us"}, ...], "ctas": [{"cta", "sm", "us":
// {"slot": us, ...}}, ...]}.
nlohmann::json trace_json(const jit::KernelTrace& t);

}  // namespace tilecraft::harness
