// GPU clock and power state around timed sections, through NVML loaded with
// dlopen: tilecraft links no NVML and runs where it is missing (no record).
#include "tilecraft/harness/gpu_state.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <chrono>
#include <mutex>

#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::harness {
namespace {

// The few NVML entry points used, declared here (the toolkit does not ship
// nvml.h everywhere); all return nvmlReturn_t, 0 on success.
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlViolationTime {
  unsigned long long reference_us;  // CPU timestamp
  unsigned long long violation_ns;  // cumulative time in violation
};
constexpr int kNvmlClockSm = 1, kNvmlTemperatureGpu = 0, kNvmlPolicyPower = 0, kNvmlPolicyThermal = 1;

struct Nvml {
  int (*init)() = nullptr;
  int (*by_pci)(const char*, NvmlDevice*) = nullptr;
  int (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*temperature)(NvmlDevice, int, unsigned*) = nullptr;
  int (*energy)(NvmlDevice, unsigned long long*) = nullptr;
  int (*power)(NvmlDevice, unsigned*) = nullptr;
  int (*power_limit)(NvmlDevice, unsigned*) = nullptr;
  int (*violation)(NvmlDevice, int, NvmlViolationTime*) = nullptr;
  int (*reasons)(NvmlDevice, unsigned long long*) = nullptr;
  std::string why;  // empty: usable
};

template <typename Fn>
void bind(void* lib, Fn& fn, const char* name, const char* fallback = nullptr) {
  void* p = dlsym(lib, name);
  if (!p && fallback) p = dlsym(lib, fallback);
  fn = reinterpret_cast<Fn>(p);
}

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      n.why = "NVML (libnvidia-ml.so.1) not found";
      return;
    }
    bind(lib, n.init, "nvmlInit_v2");
    bind(lib, n.by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    bind(lib, n.clock, "nvmlDeviceGetClockInfo");
    bind(lib, n.max_clock, "nvmlDeviceGetMaxClockInfo");
    bind(lib, n.temperature, "nvmlDeviceGetTemperature");
    bind(lib, n.energy, "nvmlDeviceGetTotalEnergyConsumption");
    bind(lib, n.power, "nvmlDeviceGetPowerUsage");
    bind(lib, n.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    bind(lib, n.violation, "nvmlDeviceGetViolationStatus");
    // Renamed from "throttle" to "event" reasons in newer drivers; same bits.
    bind(lib, n.reasons, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (!n.init || !n.by_pci) {
      n.why = "NVML lacks nvmlInit_v2 or nvmlDeviceGetHandleByPciBusId_v2";
      return;
    }
    if (int rc = n.init(); rc != 0) n.why = fmt::format("nvmlInit_v2 failed ({})", rc);
  });
  return n;
}

// NVML's handle for CUDA device `ordinal`, by PCI address (NVML and CUDA
// may number devices differently).
bool nvml_device(int ordinal, NvmlDevice* dev, std::string& why) {
  if (!rt::driver_available()) {
    why = "no CUDA driver";
    return false;
  }
  if (ordinal < 0 || ordinal >= rt::device_count()) {
    why = fmt::format("no CUDA device {}", ordinal);
    return false;
  }
  const std::string pci = rt::device_info(ordinal).pci_bus_id;
  if (int rc = nvml().by_pci(pci.c_str(), dev); rc != 0) {
    why = fmt::format("NVML has no device at {} ({})", pci, rc);
    return false;
  }
  return true;
}

template <typename T, typename Fn, typename... Args>
std::optional<T> query(Fn fn, Args... args) {
  T v{};
  if (!fn || fn(args..., &v) != 0) return std::nullopt;
  return v;
}

std::optional<uint64_t> violation_ns(NvmlDevice dev, int policy) {
  NvmlViolationTime t{};
  if (!nvml().violation || nvml().violation(dev, policy, &t) != 0) return std::nullopt;
  return uint64_t(t.violation_ns);
}

}  // namespace

std::optional<GpuCounters> read_gpu_counters(int ordinal, std::string* why) {
  const Nvml& n = nvml();
  std::string reason = n.why;
  NvmlDevice dev = nullptr;
  if (reason.empty() && !nvml_device(ordinal, &dev, reason)) dev = nullptr;
  if (!dev) {
    if (why) *why = reason;
    return std::nullopt;
  }
  GpuCounters c;
  c.wall_ns = uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
  if (auto e = query<unsigned long long>(n.energy, dev)) c.energy_mj = uint64_t(*e);
  c.power_mw = query<unsigned>(n.power, dev);
  c.power_limit_mw = query<unsigned>(n.power_limit, dev);
  c.power_violation_ns = violation_ns(dev, kNvmlPolicyPower);
  c.thermal_violation_ns = violation_ns(dev, kNvmlPolicyThermal);
  c.sm_clock_mhz = query<unsigned>(n.clock, dev, kNvmlClockSm);
  c.max_sm_clock_mhz = query<unsigned>(n.max_clock, dev, kNvmlClockSm);
  c.temperature_c = query<unsigned>(n.temperature, dev, kNvmlTemperatureGpu);
  if (auto r = query<unsigned long long>(n.reasons, dev)) c.clock_event_reasons = uint64_t(*r);
  return c;
}

std::string clock_reason_names(uint64_t reasons) {
  static const std::pair<uint64_t, const char*> kNames[] = {
      {0x1, "idle"},           {0x2, "application clocks"}, {0x4, "sw power cap"},
      {0x8, "hw slowdown"},    {0x10, "sync boost"},        {0x20, "sw thermal slowdown"},
      {0x40, "hw thermal slowdown"}, {0x80, "hw power brake"}, {0x100, "display clocks"}};
  std::string s;
  for (const auto& [bit, name] : kNames)
    if (reasons & bit) s += (s.empty() ? "" : ", ") + std::string(name);
  if (uint64_t rest = reasons & ~uint64_t(0x1ff)) s += (s.empty() ? "" : ", ") + fmt::format("bits {:#x}", rest);
  return s.empty() ? "none" : s;
}

GpuStateDelta gpu_state_delta(const GpuCounters& a, const GpuCounters& b) {
  GpuStateDelta d;
  d.seconds = b.wall_ns > a.wall_ns ? double(b.wall_ns - a.wall_ns) * 1e-9 : 0.0;
  // The energy counter advances in steps too coarse for short sections (the
  // same 230 ms of race case 2 read 159 to 316 W on one H200): an average
  // only over kMinPowerWindowS or more.
  if (a.energy_mj && b.energy_mj && *b.energy_mj >= *a.energy_mj) d.energy_j = double(*b.energy_mj - *a.energy_mj) * 1e-3;
  if (d.energy_j && d.seconds >= kMinPowerWindowS) d.avg_power_w = *d.energy_j / d.seconds;
  if (b.power_mw) d.power_w_end = *b.power_mw * 1e-3;
  if (b.power_limit_mw) d.power_limit_w = *b.power_limit_mw * 1e-3;
  if (a.power_violation_ns && b.power_violation_ns && *b.power_violation_ns >= *a.power_violation_ns)
    d.power_held_ms = double(*b.power_violation_ns - *a.power_violation_ns) * 1e-6;
  if (a.thermal_violation_ns && b.thermal_violation_ns && *b.thermal_violation_ns >= *a.thermal_violation_ns)
    d.thermal_held_ms = double(*b.thermal_violation_ns - *a.thermal_violation_ns) * 1e-6;
  d.sm_clock_mhz_end = b.sm_clock_mhz;
  d.max_sm_clock_mhz = b.max_sm_clock_mhz;
  d.temperature_c_end = b.temperature_c;
  d.reasons_end = b.clock_event_reasons;
  return d;
}

bool GpuStateDelta::slowed() const {
  if (power_held_ms.value_or(0) > 0 || thermal_held_ms.value_or(0) > 0) return true;
  // An idle GPU (the timing has just synchronised) may lower its clock: only
  // a busy one's clock below the maximum counts.
  if (reasons_end && (*reasons_end & 0x1)) return false;
  return sm_clock_mhz_end && max_sm_clock_mhz && *sm_clock_mhz_end * 100 < *max_sm_clock_mhz * 97;
}

nlohmann::json GpuStateDelta::to_json() const {
  nlohmann::json j;
  j["seconds"] = seconds;
  if (avg_power_w) j["avg_power_w"] = *avg_power_w;
  if (power_w_end) j["power_w_end"] = *power_w_end;
  if (power_limit_w) j["power_limit_w"] = *power_limit_w;
  if (power_held_ms) j["power_held_ms"] = *power_held_ms;
  if (thermal_held_ms) j["thermal_held_ms"] = *thermal_held_ms;
  if (sm_clock_mhz_end) j["sm_clock_mhz_end"] = *sm_clock_mhz_end;
  if (max_sm_clock_mhz) j["max_sm_clock_mhz"] = *max_sm_clock_mhz;
  if (temperature_c_end) j["temperature_c_end"] = *temperature_c_end;
  if (reasons_end) j["clock_reasons_end"] = clock_reason_names(*reasons_end);
  j["slowed"] = slowed();
  j["summary"] = summary();
  return j;
}

std::string GpuStateDelta::summary() const {
  std::string s = fmt::format("GPU over {:.0f} ms of timing:", seconds * 1e3);
  if (avg_power_w) s += fmt::format(" {:.0f} W average,", *avg_power_w);
  if (power_w_end) s += fmt::format(" {:.0f} W at the end,", *power_w_end);
  if (power_limit_w) s += fmt::format(" power limit {:.0f} W,", *power_limit_w);
  if (power_held_ms || thermal_held_ms)
    s += fmt::format(" clock held back {:.1f} ms by power, {:.1f} ms by temperature,", power_held_ms.value_or(0),
                     thermal_held_ms.value_or(0));
  if (sm_clock_mhz_end)
    s += fmt::format(" SM clock {} MHz at the end{}", *sm_clock_mhz_end,
                     max_sm_clock_mhz ? fmt::format(" (max {})", *max_sm_clock_mhz) : "");
  if (temperature_c_end) s += fmt::format(", {} C", *temperature_c_end);
  if (reasons_end) s += ", reasons: " + clock_reason_names(*reasons_end);
  return s;
}

}  // namespace tilecraft::harness
