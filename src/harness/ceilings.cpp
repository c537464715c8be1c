#include "tilecraft/harness/ceilings.h"

#include <filesystem>
#include <fstream>

#include "harness/params.cuh"
#include "tilecraft/harness/env.h"
#include "tilecraft/harness/timing.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::harness {
namespace fs = std::filesystem;

nlohmann::json Ceilings::to_json() const {
  return {{"copy_gbps", copy_gbps},       {"read_gbps", read_gbps},   {"gemm_tflops", gemm_tflops},
          {"empty_launch_us", empty_launch_us}, {"gemm_note", gemm_note}, {"measured_at", measured_at},
          {"from_cache", from_cache}};
}

namespace {
fs::path cache_file(int device) {
  rt::DeviceInfo d = rt::device_info(device);
  // Per board (its PCI address), not per model: boards of one model differ by
  // a few percent (docs/perf/fused_moe.md), and --device picks among them.
  std::string name = d.name + "-" + std::to_string(d.sm_count) + "sm-drv" + std::to_string(d.driver_version) + "-pci" +
                     d.pci_bus_id;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  return fs::path(jit::cache_dir()) / "ceilings" / (name + ".json");
}

double stream_gbps(const char* fn, std::vector<std::string> targs, size_t bytes, bool copy, int device) {
  rt::Stream stream(device);
  DeviceTensor src(DType::kI32, {int64_t(bytes / 4)}, device), sink(DType::kI32, {4}, device);
  src.fill_bytes(0x3c);
  DeviceTensor dst;
  if (copy) dst = DeviceTensor(DType::kI32, {int64_t(bytes / 4)}, device);
  jit::KernelSpec spec{"harness/bandwidth.cuh", fn, targs, fn};
  const auto& k = jit::get_kernel(spec, device);
  tc::harness::StreamParams p{src.data(), copy ? dst.data() : nullptr, bytes / 16, static_cast<unsigned*>(sink.data())};
  const unsigned grid = unsigned(rt::device_info(device).sm_count * 4);
  TimingSettings s;
  s.warmup = 3;
  s.repeat = 20;
  s.hot = true;  // 2 GiB streams dwarf L2
  TimingStats t = time_cuda([&](CUstream st) { jit::launch(k, grid, 1, 512, 0, st, &p); }, stream.get(), s, nullptr);
  return double(copy ? 2 * bytes : bytes) / (t.median * 1e-3) / 1e9;
}
double memcpy_gbps(size_t bytes, int device) {
  rt::Stream stream(device);
  DeviceTensor src(DType::kI32, {int64_t(bytes / 4)}, device), dst(DType::kI32, {int64_t(bytes / 4)}, device);
  src.fill_bytes(0x3c);
  TimingSettings s;
  s.warmup = 3;
  s.repeat = 20;
  s.hot = true;
  TimingStats t = time_cuda(
      [&](CUstream st) {
        TC_DRV(cuMemcpyDtoDAsync, reinterpret_cast<CUdeviceptr>(dst.data()), reinterpret_cast<CUdeviceptr>(src.data()),
               bytes, st);
      },
      stream.get(), s, nullptr);
  return double(2 * bytes) / (t.median * 1e-3) / 1e9;
}
}  // namespace

double empty_launch_us(int device, const TimingSettings& s, L2Flusher* flusher) {
  rt::Stream stream(device);
  jit::KernelSpec spec{"harness/bandwidth.cuh", "tc::harness::empty_kernel", {}, "empty"};
  const auto& k = jit::get_kernel(spec, device);
  tc::harness::StreamParams p{};
  return time_cuda([&](CUstream st) { jit::launch(k, 1, 1, 32, 0, st, &p); }, stream.get(), s, flusher).median * 1e3;
}

double same_size_copy_us(double bytes, int device, const TimingSettings& s, L2Flusher* flusher) {
  const size_t words = std::max<size_t>(1, size_t(bytes / 2 / 16));
  DeviceTensor src(DType::kI32, {int64_t(words * 4)}, device), dst(DType::kI32, {int64_t(words * 4)}, device),
      sink(DType::kI32, {4}, device);
  src.fill_bytes(0x3c);
  rt::Stream stream(device);
  jit::KernelSpec spec{"harness/bandwidth.cuh", "tc::harness::copy_kernel", {"4"}, "copy"};
  const auto& k = jit::get_kernel(spec, device);
  tc::harness::StreamParams p{src.data(), dst.data(), words, static_cast<unsigned*>(sink.data())};
  const unsigned grid = unsigned(std::min<size_t>(size_t(rt::device_info(device).sm_count) * 4, (words + 511) / 512));
  return time_cuda([&](CUstream st) { jit::launch(k, grid, 1, 512, 0, st, &p); }, stream.get(), s, flusher).median *
         1e3;
}

Ceilings measure_ceilings(int device, bool remeasure) {
  rt::ensure_context(device);
  fs::path f = cache_file(device);
  if (!remeasure && fs::exists(f)) {
    try {
      auto j = nlohmann::json::parse(std::ifstream(f));
      Ceilings c;
      c.copy_gbps = j.at("copy_gbps");
      c.read_gbps = j.at("read_gbps");
      c.gemm_tflops = j.at("gemm_tflops");
      c.empty_launch_us = j.at("empty_launch_us");
      c.gemm_note = j.value("gemm_note", "");
      c.measured_at = j.value("measured_at", "");
      c.from_cache = true;
      return c;
    } catch (const std::exception&) {
      // unreadable: measure again
    }
  }
  Ceilings c;
  const size_t bytes = size_t(1) << 30;  // 1 GiB: many times any L2
  // The copy ceiling is the better of our streaming copy kernel and the driver's memcpy.
  c.copy_gbps = std::max(stream_gbps("tc::harness::copy_kernel", {"4"}, bytes, true, device), memcpy_gbps(bytes, device));
  c.read_gbps = stream_gbps("tc::harness::read_kernel", {"4"}, 2 * bytes, false, device);
  c.gemm_tflops = cublas_gemm_tflops(device, 8192, c.gemm_note);
  {
    // Same protocol as the ops (read flush before each iteration): with the
    // GPU busy flushing, the host runs ahead and the launch is timed alone.
    L2Flusher flusher(device);
    TimingSettings s;
    s.repeat = 200;
    c.empty_launch_us = empty_launch_us(device, s, &flusher);
  }
  c.measured_at = now_iso8601();
  try {
    fs::create_directories(f.parent_path());
    std::ofstream(f) << c.to_json().dump(2);
  } catch (const std::exception&) {
    // caching is best effort
  }
  return c;
}

}  // namespace tilecraft::harness
