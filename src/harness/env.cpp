#include "tilecraft/harness/env.h"

#include <cuda.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>

#include <fmt/format.h>

#include "tilecraft/jit/compiler.h"
#include "tilecraft/jit/embedded_sources.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::harness {
namespace {
std::string run_capture(const std::string& cmd) {
  std::array<char, 256> buf{};
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) return "";
  while (fgets(buf.data(), int(buf.size()), p.get())) out += buf.data();
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}
}  // namespace

std::string git_commit() {
  if (const char* c = std::getenv("TILECRAFT_GIT_COMMIT"); c && *c) return c;
  std::string src = TILECRAFT_SOURCE_DIR;
  std::string c = run_capture("git -C '" + src + "' rev-parse --short=12 HEAD 2>/dev/null");
  if (c.empty()) return "unknown";
  if (!run_capture("git -C '" + src + "' status --porcelain --untracked-files=no 2>/dev/null").empty()) c += "-dirty";
  return c;
}

std::string now_iso8601() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string EnvInfo::device_label() const {
  if (!has_gpu) return "cpu (no CUDA device)";
  return fmt::format("{} ({})", j.value("gpu", "?"), j.value("arch", "?"));
}

EnvInfo capture_env(int device) {
  EnvInfo e;
  auto& j = e.j;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  j["host"] = host;
  j["tilecraft_version"] = TILECRAFT_VERSION;
  j["git_commit"] = git_commit();
  // The kernel texts this run compiles (embedded, or TILECRAFT_KERNEL_DIR's).
  j["kernel_sources_sha256"] = jit::kernel_sources_sha256().substr(0, 16);
  if (const char* d = std::getenv("TILECRAFT_KERNEL_DIR"); d && *d) j["kernel_dir"] = d;
  j["build"] = TILECRAFT_BUILD_FLAGS;
  j["cuda_toolkit_headers"] = fmt::format("{}.{}", CUDA_VERSION / 1000, (CUDA_VERSION % 1000) / 10);
  j["nvrtc_version"] = jit::nvrtc_version();
  j["cuda_home"] = jit::cuda_home();
  j["jit_cache_dir"] = jit::cache_dir();
  j["jit_disk_cache"] = jit::disk_cache_enabled();
  // Programmatic dependent launch moves decode timings by up to ~10%: every
  // record says whether it was on (TILECRAFT_PDL=0 turns it off).
  j["dependent_launch"] = jit::dependent_launch_enabled();
  j["timestamp"] = now_iso8601();
  e.has_gpu = rt::driver_available();
  if (!e.has_gpu) {
    e.no_gpu_reason = rt::driver_unavailable_reason();
    j["gpu"] = nullptr;
    j["no_gpu_reason"] = e.no_gpu_reason;
    return e;
  }
  rt::DeviceInfo d = rt::device_info(device);
  j["gpu"] = d.name;
  j["device_ordinal"] = device;
  j["arch"] = d.arch();
  j["compute_capability"] = fmt::format("{}.{}", d.cc_major, d.cc_minor);
  j["sm_count"] = d.sm_count;
  j["sm_clock_mhz"] = d.sm_clock_khz / 1000;
  j["mem_clock_mhz"] = d.mem_clock_khz / 1000;
  j["mem_bus_bits"] = d.mem_bus_bits;
  j["memory_gib"] = double(d.total_mem) / (1 << 30);
  j["l2_mib"] = double(d.l2_bytes) / (1 << 20);
  j["smem_per_block_optin_kib"] = d.max_smem_per_block_optin / 1024;
  j["warp_size"] = d.warp_size;
  j["driver_version"] = fmt::format("{}.{}", d.driver_version / 1000, (d.driver_version % 1000) / 10);
  j["pci_bus_id"] = d.pci_bus_id;
  // Every GPU this process sees, by CUDA ordinal (what --device takes).
  j["gpus_visible"] = rt::device_count();
  for (int i = 0; i < rt::device_count(); ++i) {
    const rt::DeviceInfo g = i == device ? d : rt::device_info(i);
    j["gpus"].push_back(fmt::format("{}: {} ({}, {})", i, g.name, g.arch(), g.pci_bus_id));
  }
  // nvidia-smi asked about this GPU by its PCI address (its numbering may
  // differ from CUDA's).
  const std::string smi_gpu = "nvidia-smi -i " + d.pci_bus_id + " ";
  std::string smi = run_capture(smi_gpu +
      "--query-gpu=driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader 2>/dev/null | head -1");
  if (!smi.empty()) j["nvidia_smi"] = smi;
  // The power cap in force against the board's default and most: compute-
  // bound kernels on the H200 spend most of their timing held back by power
  // (docs/perf/fused_moe.md, session 33). Its own query, so that a field an
  // older nvidia-smi lacks loses this line only.
  std::string power = run_capture(smi_gpu +
      "--query-gpu=power.limit,power.default_limit,power.max_limit --format=csv,noheader 2>/dev/null | "
      "head -1");
  if (!power.empty()) j["nvidia_smi_power_limits"] = power;
  return e;
}

}  // namespace tilecraft::harness
