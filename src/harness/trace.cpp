#include "tilecraft/harness/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace tilecraft::harness {

namespace {
// The stamps of the last launch (the launch of the latest stamp, where
// t.grids names launches), in us after the origin slot's earliest stamp.
struct LastLaunch {
  const jit::KernelTrace& t;
  bool ok = false;
  size_t latest = 0;
  unsigned long long base = 0;

  LastLaunch(const jit::KernelTrace& tr, int origin) : t(tr) {
    const size_t n = size_t(t.ctas) * size_t(t.slots);
    if (t.slots <= 0 || t.ctas <= 0 || t.stamps.size() < n) return;
    for (size_t i = 1; i < n; ++i)
      if (t.stamps[i] > t.stamps[latest]) latest = i;
    unsigned long long first = std::numeric_limits<unsigned long long>::max(), any = first;
    for (int c = 0; c < t.ctas; ++c)
      for (int s = 0; s < t.slots; ++s)
        if (const unsigned long long v = raw(c, s)) {
          any = std::min(any, v);
          if (s == origin) first = std::min(first, v);
        }
    if (any == std::numeric_limits<unsigned long long>::max()) return;
    ok = true;
    base = first == std::numeric_limits<unsigned long long>::max() ? any : first;
  }
  size_t index(int cta, int slot) const { return size_t(cta) * size_t(t.slots) + size_t(slot); }
  // The stamp in ns, 0 where none or another launch's.
  unsigned long long raw(int cta, int slot) const {
    const size_t i = index(cta, slot);
    const bool launches = t.grids.size() == t.stamps.size();
    return !launches || t.grids[i] == t.grids[latest] ? t.stamps[i] : 0;
  }
  // Signed: a slot may be stamped before the origin's earliest stamp.
  double us(unsigned long long v) const { return (double(v) - double(base)) / 1000.0; }
  int sm(int cta, int slot) const { return t.sms.size() == t.stamps.size() ? t.sms[index(cta, slot)] : -1; }
};
}  // namespace

std::vector<TraceCta> trace_ctas(const jit::KernelTrace& t, int origin) {
  std::vector<TraceCta> out;
  const LastLaunch l(t, origin);
  if (!l.ok) return out;
  for (int c = 0; c < t.ctas; ++c) {
    TraceCta row;
    row.cta = c;
    for (int s = 0; s < t.slots; ++s)
      if (const unsigned long long v = l.raw(c, s)) {
        row.slots.push_back(s), row.us.push_back(l.us(v));
        if (row.sm < 0) row.sm = l.sm(c, s);
      }
    if (!row.slots.empty()) out.push_back(std::move(row));
  }
  return out;
}

// Per slot over the CTAs of trace_ctas: one walk of the stamps.
std::vector<TraceSlotStats> summarize_trace(const jit::KernelTrace& t, int origin) {
  std::vector<TraceSlotStats> by_slot(size_t(std::max(t.slots, 0)));
  for (const TraceCta& c : trace_ctas(t, origin))
    for (size_t i = 0; i < c.slots.size(); ++i) {
      TraceSlotStats& st = by_slot[size_t(c.slots[i])];
      const double us = c.us[i];
      st.min_us = st.ctas ? std::min(st.min_us, us) : us;
      st.max_us = st.ctas ? std::max(st.max_us, us) : us;
      st.mean_us += us;  // the sum until the end
      ++st.ctas;
    }
  std::vector<TraceSlotStats> out;
  for (int s = 0; s < t.slots; ++s) {
    TraceSlotStats st = by_slot[size_t(s)];
    if (!st.ctas) continue;
    st.slot = s;
    st.mean_us /= st.ctas;
    out.push_back(st);
  }
  return out;
}

nlohmann::json trace_json(const jit::KernelTrace& t) {
  nlohmann::json slots = nlohmann::json::array();
  for (const TraceSlotStats& st : summarize_trace(t))
    slots.push_back({{"slot", st.slot}, {"ctas", st.ctas}, {"min_us", st.min_us}, {"mean_us", st.mean_us},
                     {"max_us", st.max_us}});
  nlohmann::json ctas = nlohmann::json::array();
  for (const TraceCta& c : trace_ctas(t)) {
    nlohmann::json at = nlohmann::json::object();
    for (size_t i = 0; i < c.slots.size(); ++i) at[std::to_string(c.slots[i])] = c.us[i];
    ctas.push_back({{"cta", c.cta}, {"sm", c.sm}, {"us", at}});
  }
  return {{"function", t.function}, {"config", t.config}, {"origin_ns", trace_origin_ns(t)}, {"slots", slots},
          {"ctas", ctas}};
}

unsigned long long trace_origin_ns(const jit::KernelTrace& t, int origin) {
  const LastLaunch l(t, origin);
  return l.ok ? l.base : 0;
}

std::string format_trace(const jit::KernelTrace& t, bool per_cta) {
  std::string s = fmt::format("    trace {} [{}] (its last launch, us after slot 0's first stamp, {} ns)\n", t.function,
                              t.config, trace_origin_ns(t));
  for (const TraceSlotStats& st : summarize_trace(t))
    s += fmt::format("      slot {:2d}: {:4d} CTAs  min {:8.2f}  mean {:8.2f}  max {:8.2f}\n", st.slot, st.ctas,
                     st.min_us, st.mean_us, st.max_us);
  if (per_cta)
    for (const TraceCta& c : trace_ctas(t)) {
      s += fmt::format("      cta {:4d} sm {:3d}:", c.cta, c.sm);
      for (size_t i = 0; i < c.slots.size(); ++i) s += fmt::format(" {}={:.2f}", c.slots[i], c.us[i]);
      s += "\n";
    }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace tilecraft::harness
