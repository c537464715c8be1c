#include "tilecraft/harness/energy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tilecraft/harness/gpu_state.h"
#include "tilecraft/runtime/device.h"

namespace tilecraft::harness {
namespace {

struct Loop {
  double gpu_ms = 0;                // events around the loop
  std::optional<GpuStateDelta> d;   // NVML's counters before and after
};

// `calls` rounds of (flush unless hot, then fn if given), between two
// counter readings; synchronised at the end.
Loop run_loop(const std::function<void(CUstream)>* fn, int device, CUstream stream, const TimingSettings& t, L2Flusher* flusher,
              int64_t calls, std::string& why) {
  Loop l;
  rt::Event e0, e1;
  const std::optional<GpuCounters> a = read_gpu_counters(device, &why);
  e0.record(stream);
  for (int64_t i = 0; i < calls; ++i) {
    if (!t.hot && flusher) flusher->flush(stream, t.flush);
    if (fn) (*fn)(stream);
  }
  e1.record(stream);
  l.gpu_ms = double(e1.elapsed_ms_since(e0));  // synchronises
  const std::optional<GpuCounters> b = a ? read_gpu_counters(device, &why) : std::nullopt;
  if (b) l.d = gpu_state_delta(*a, *b);
  return l;
}

std::optional<double> joules(const Loop& l) { return l.d ? l.d->energy_j : std::nullopt; }

}  // namespace

nlohmann::json energy_per_call(const std::function<void(CUstream)>& fn, int device, CUstream stream, const TimingSettings& timing,
                               L2Flusher* flusher, double ms_per_call, double min_ms) {
  std::string why;
  // The flushes alone: a short probe sizes both loops (each call runs after
  // one), then a loop of them for at least min_ms too (a short loop would
  // read the counter's steps); their energy per flush, times the calls, is
  // taken off the scope's loop.
  const bool flushed = !timing.hot && flusher;
  const double probe_ms = flushed ? run_loop(nullptr, device, stream, timing, flusher, 16, why).gpu_ms / 16 : 0.0;
  const auto loop_calls = [&](double ms_each) {
    return std::clamp<int64_t>(int64_t(std::ceil(min_ms / std::max(ms_each, 1e-3))), 1, int64_t(10'000'000));
  };
  const int64_t calls = loop_calls(ms_per_call + probe_ms);
  const Loop run = run_loop(&fn, device, stream, timing, flusher, calls, why);
  double flush_ms = 0;
  std::optional<double> e_flush = 0.0;
  if (flushed) {
    const int64_t flushes = loop_calls(probe_ms);
    const Loop flush = run_loop(nullptr, device, stream, timing, flusher, flushes, why);
    flush_ms = flush.gpu_ms / double(flushes);
    e_flush = joules(flush);
    if (e_flush) *e_flush = *e_flush / double(flushes) * double(calls);
  }
  nlohmann::json j{{"calls", calls}};
  const std::optional<double> e_run = joules(run);
  if (!e_run || !e_flush) {
    j["unavailable"] = why.empty() ? "no energy counter (NVML nvmlDeviceGetTotalEnergyConsumption)" : why;
    return j;
  }
  const GpuStateDelta& d = *run.d;  // (e_run: present)
  j["seconds"] = d.seconds;
  if (d.seconds * 1e3 < kMinEnergyMs) {
    j["unavailable"] = fmt::format("the loop ran {:.0f} ms, under the {:.0f} ms the energy counter needs", d.seconds * 1e3,
                                   kMinEnergyMs);
    return j;
  }
  j["ms_per_call"] = run.gpu_ms / double(calls) - flush_ms;
  j["joules_per_call"] = (*e_run - *e_flush) / double(calls);
  j["flush_joules_per_call"] = *e_flush / double(calls);
  j["avg_power_w"] = *e_run / d.seconds;
  if (d.power_held_ms) j["power_held_ms"] = *d.power_held_ms;
  if (d.power_limit_w) j["power_limit_w"] = *d.power_limit_w;
  if (d.sm_clock_mhz_end) j["sm_clock_mhz_end"] = *d.sm_clock_mhz_end;
  return j;
}

std::string energy_summary(const nlohmann::json& e) {
  if (e.contains("unavailable")) return "energy unavailable: " + e["unavailable"].get<std::string>();
  if (!e.contains("joules_per_call")) return "";
  std::string s = fmt::format("{:.4g} J/call alone ({:.2f} ms/call, {} calls; flushes' {:.3g} J/call taken off), {:.0f} W",
                              e["joules_per_call"].get<double>(), e["ms_per_call"].get<double>(),
                              e["calls"].get<int64_t>(), e["flush_joules_per_call"].get<double>(),
                              e["avg_power_w"].get<double>());
  if (e.contains("power_limit_w")) s += fmt::format(" (limit {:.0f})", e["power_limit_w"].get<double>());
  if (e.contains("power_held_ms"))
    s += fmt::format(", clock held back by power {:.0f}% of {:.2f} s",
                     100 * e["power_held_ms"].get<double>() * 1e-3 / e["seconds"].get<double>(),
                     e["seconds"].get<double>());
  return s;
}

}  // namespace tilecraft::harness
