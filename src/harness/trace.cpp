#include "tilecraft/harness/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace tilecraft::harness {

std::vector<TraceSlotStats> summarize_trace(const jit::KernelTrace& t, int origin) {
  std::vector<TraceSlotStats> out;
  const size_t n = size_t(t.ctas) * size_t(t.slots);
  if (t.slots <= 0 || t.ctas <= 0 || t.stamps.size() < n) return out;
  const bool launches = t.grids.size() >= n;
  // The last launch: the one that made the latest stamp.
  size_t latest = 0;
  for (size_t i = 1; i < n; ++i)
    if (t.stamps[i] > t.stamps[latest]) latest = i;
  const auto at = [&](int cta, int slot) -> unsigned long long {
    const size_t i = size_t(cta) * size_t(t.slots) + size_t(slot);
    return !launches || t.grids[i] == t.grids[latest] ? t.stamps[i] : 0;
  };
  unsigned long long base = std::numeric_limits<unsigned long long>::max(), any = base;
  for (int c = 0; c < t.ctas; ++c)
    for (int s = 0; s < t.slots; ++s)
      if (const unsigned long long v = at(c, s)) {
        any = std::min(any, v);
        if (s == origin) base = std::min(base, v);
      }
  if (any == std::numeric_limits<unsigned long long>::max()) return out;
  if (base == std::numeric_limits<unsigned long long>::max()) base = any;
  for (int s = 0; s < t.slots; ++s) {
    TraceSlotStats st;
    st.slot = s;
    double sum = 0;
    for (int c = 0; c < t.ctas; ++c) {
      const unsigned long long v = at(c, s);
      if (!v) continue;
      // Signed: a slot may be stamped before the origin's earliest stamp.
      const double us = (double(v) - double(base)) / 1000.0;
      st.min_us = st.ctas ? std::min(st.min_us, us) : us;
      st.max_us = st.ctas ? std::max(st.max_us, us) : us;
      sum += us;
      ++st.ctas;
    }
    if (!st.ctas) continue;
    st.mean_us = sum / st.ctas;
    out.push_back(st);
  }
  return out;
}

nlohmann::json trace_json(const jit::KernelTrace& t) {
  nlohmann::json slots = nlohmann::json::array();
  for (const TraceSlotStats& st : summarize_trace(t))
    slots.push_back({{"slot", st.slot}, {"ctas", st.ctas}, {"min_us", st.min_us}, {"mean_us", st.mean_us},
                     {"max_us", st.max_us}});
  return {{"function", t.function}, {"config", t.config}, {"slots", slots}};
}

std::string format_trace(const jit::KernelTrace& t) {
  std::string s =
      fmt::format("    trace {} [{}] (its last launch, us after slot 0's first stamp)\n", t.function, t.config);
  for (const TraceSlotStats& st : summarize_trace(t))
    s += fmt::format("      slot {:2d}: {:4d} CTAs  min {:8.2f}  mean {:8.2f}  max {:8.2f}\n", st.slot, st.ctas,
                     st.min_us, st.mean_us, st.max_us);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace tilecraft::harness
