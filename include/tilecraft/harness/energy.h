#pragma once
// Energy per call of one timed scope, for comparing kernels on a board whose
// power cap holds their clocks back (the H200's compute-bound GEMMs spend most
// of their timing there: docs/perf/fused_moe.md, session 33). The scope runs
// alone, back to back, as it is timed (an L2 flush before each call unless
// hot) for at least a second of GPU time, between two readings of NVML's
// energy counter; the flushes are then run alone (also for that long) and
// their energy per flush, times the calls, taken off. Interleaved timing shares one clock state between scopes;
// this shows what each costs in joules and whether it alone hits the cap.
#include <functional>

#include <nlohmann/json.hpp>

#include "tilecraft/harness/timing.h"

namespace tilecraft::harness {

// Shortest loop bench takes for --energy-ms (the energy counter's steps).
constexpr double kMinEnergyMs = 1000;

// `ms_per_call`: the scope's timed median (sizes the loop); `min_ms`: GPU
// time to run it for (>= kMinEnergyMs). JSON: calls, seconds, ms_per_call
// (alone, flush taken off), joules_per_call, flush_joules_per_call,
// avg_power_w, power_held_ms (of the loop), or "unavailable" saying why.
// `device`: the GPU `stream` belongs to (whose counter is read).
nlohmann::json energy_per_call(const std::function<void(CUstream)>& fn, int device, CUstream stream,
                               const TimingSettings& timing, L2Flusher* flusher, double ms_per_call, double min_ms);

// One console line for a record's energy entry ("" for none).
std::string energy_summary(const nlohmann::json& e);

}  // namespace tilecraft::harness
