#pragma once
// What the GPU's clock and power policy did while a benchmark was timed, read
// through NVML (loaded lazily, like the driver) before and after the timed
// section: no sampling thread, so nothing competes with the timed launches.
// A record with time held back by power or thermal policy, or an SM clock
// below its maximum, was not timed at full speed; two runs that differ there
// are not comparable as they stand.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tilecraft::harness {

// One reading of the device's counters.
struct GpuCounters {
  uint64_t wall_ns = 0;                          // steady clock of this process
  std::optional<uint64_t> energy_mj;             // total energy since the driver loaded
  std::optional<unsigned> power_mw;              // the driver's power reading (its own short average)
  std::optional<unsigned> power_limit_mw;        // the power cap in force (what "held back by power" is against)
  std::optional<uint64_t> power_violation_ns;    // cumulative time held below the target clock by power
  std::optional<uint64_t> thermal_violation_ns;  // ... by thermal policy
  std::optional<unsigned> sm_clock_mhz, max_sm_clock_mhz, temperature_c;
  std::optional<uint64_t> clock_event_reasons;   // NVML clocks event (throttle) reason bits, now
};

// Shortest section whose average power is reported (the energy counter's
// steps make shorter averages noise).
constexpr double kMinPowerWindowS = 1.0;

// What happened between two readings.
struct GpuStateDelta {
  double seconds = 0;
  std::optional<double> energy_j;     // the energy counter's advance (coarse steps: see kMinPowerWindowS)
  std::optional<double> avg_power_w;  // energy_j / seconds; only over kMinPowerWindowS or more
  std::optional<double> power_w_end;  // the driver's power reading at the end
  std::optional<double> power_limit_w;  // the power cap in force at the end
  std::optional<double> power_held_ms, thermal_held_ms;
  std::optional<unsigned> sm_clock_mhz_end, max_sm_clock_mhz, temperature_c_end;
  std::optional<uint64_t> reasons_end;
  // True where the counters show the clock was held back during the section,
  // or the SM clock at its end was more than 3% below the maximum.
  bool slowed() const;
  nlohmann::json to_json() const;
  std::string summary() const;  // one line for the console
};

// Names of the NVML clock event reason bits set in `reasons` (e.g. "sw power
// cap", "hw thermal slowdown"); "idle" and "none" as they apply.
std::string clock_reason_names(uint64_t reasons);

GpuStateDelta gpu_state_delta(const GpuCounters& before, const GpuCounters& after);

// Reads the counters of the GPU behind CUDA device `ordinal` (matched by PCI
// address). Without NVML or that device, nullopt and `why` says why.
std::optional<GpuCounters> read_gpu_counters(int ordinal, std::string* why = nullptr);

}  // namespace tilecraft::harness
