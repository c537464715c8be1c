// Runtime, JIT launch, device random generator and ceilings on a real GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "test_util.h"
#include "tilecraft/harness/ceilings.h"
#include "tilecraft/harness/gpu_state.h"
#include "tilecraft/harness/random.h"
#include "tilecraft/harness/timing.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/runtime/device.h"

using namespace tilecraft;

TEST(GpuRuntime, DeviceInfo) {
  TC_REQUIRE_GPU();
  auto d = rt::device_info(0);
  EXPECT_GT(d.sm_count, 0);
  EXPECT_EQ(d.warp_size, 32);
  EXPECT_GT(d.l2_bytes, 0);
  EXPECT_FALSE(d.arch().empty());
}

TEST(GpuRuntime, DeviceRandomMatchesHost) {
  TC_REQUIRE_GPU();
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
    rt::Stream s;
    DeviceTensor d(t, {100003});
    harness::fill_uniform_device(d.view(), 42, 3, -2.f, 3.f, s.get());
    s.sync();
    HostTensor h(t, {100003});
    harness::fill_uniform(h.view(), 42, 3, -2.f, 3.f);
    EXPECT_EQ(std::memcmp(d.to_host().data(), h.data(), h.nbytes()), 0) << dtype_name(t);
  }
}

TEST(GpuRuntime, ScratchPoolIsStreamOrdered) {
  TC_REQUIRE_GPU();
  rt::Stream s;
  for (int i = 0; i < 100; ++i) {
    rt::ScratchBuffer b(1 << 20, s.get());
    TC_DRV(cuMemsetD8Async, b.get(), uint8_t(i), 1 << 20, s.get());
  }
  s.sync();
}

TEST(GpuRuntime, DriverErrorsNameTheCall) {
  TC_REQUIRE_GPU();
  rt::ensure_context(0);
  TC_EXPECT_ERROR(TC_DRV(cuMemcpyHtoD, CUdeviceptr(16), "x", 1), ErrorKind::kCuda, "cuMemcpyHtoD");
}

TEST(GpuRuntime, CeilingsArePlausible) {
  TC_REQUIRE_GPU();
  auto c = harness::measure_ceilings(0, false);
  EXPECT_GT(c.copy_gbps, 100);
  EXPECT_GT(c.read_gbps, 100);
  EXPECT_GT(c.empty_launch_us, 0.1);
  EXPECT_GT(c.gemm_tflops, 1) << c.gemm_note;
}

// The interleaved timer keeps each function's samples apart (a 256 MiB memset
// reads much slower than a 4 KiB one), and a function that throws
// is dropped with its message while the others are still timed.
TEST(GpuRuntime, InterleavedTimingKeepsFunctionsApart) {
  TC_REQUIRE_GPU();
  rt::Stream s;
  DeviceTensor big(DType::kF32, {int64_t(64) << 20});
  auto small = [&](CUstream st) { TC_DRV(cuMemsetD8Async, CUdeviceptr(big.data()), 1, 4096, st); };
  auto large = [&](CUstream st) { TC_DRV(cuMemsetD8Async, CUdeviceptr(big.data()), 2, big.nbytes(), st); };
  int calls = 0;
  auto broken = [&](CUstream) {
    ++calls;
    throw Error(ErrorKind::kCuda, "scope under test failed on purpose");
  };
  harness::TimingSettings ts;
  ts.warmup = 1, ts.repeat = 5, ts.trials = 2, ts.hot = true;
  const auto r = harness::time_cuda_interleaved({large, broken, small}, s.get(), ts, nullptr);
  ASSERT_EQ(r.stats.size(), 3u);
  EXPECT_TRUE(r.errors[0].empty());
  EXPECT_TRUE(r.errors[2].empty());
  EXPECT_NE(r.errors[1].find("failed on purpose"), std::string::npos) << r.errors[1];
  EXPECT_EQ(calls, 1);  // dropped after its first throw
  EXPECT_EQ(r.stats[0].samples_ms.size(), 10u);
  EXPECT_EQ(r.stats[2].samples_ms.size(), 10u);
  EXPECT_TRUE(r.stats[1].samples_ms.empty());
  // Medians: the GPU tests may share the GPU with other test processes,
  // whose kernels can stretch a single sample.
  EXPECT_GT(r.stats[0].median, 4 * r.stats[2].median) << r.stats[0].median << " ms vs " << r.stats[2].median << " ms";
  // The one-function form is the same protocol.
  EXPECT_EQ(harness::time_cuda(small, s.get(), ts, nullptr).samples_ms.size(), 10u);
}

// The warmup goes on past its count until warmup_ms of GPU time has passed
// (clocks ramp from idle over milliseconds; a few rounds of microsecond
// kernels left the timed rounds to see the ramp); with warmup_ms = 0 it is
// the count alone.
TEST(GpuRuntime, WarmupRunsForItsMinimumTime) {
  TC_REQUIRE_GPU();
  rt::Stream s;
  DeviceTensor buf(DType::kF32, {int64_t(1) << 20});
  int calls = 0;
  auto fn = [&](CUstream st) {
    ++calls;
    TC_DRV(cuMemsetD8Async, CUdeviceptr(buf.data()), 3, buf.nbytes(), st);
  };
  harness::TimingSettings ts;
  ts.warmup = 2, ts.repeat = 3, ts.hot = true, ts.warmup_ms = 0;
  EXPECT_EQ(harness::time_cuda(fn, s.get(), ts, nullptr).samples_ms.size(), 3u);
  EXPECT_EQ(calls, 5);
  calls = 0;
  ts.warmup_ms = 20;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(harness::time_cuda(fn, s.get(), ts, nullptr).samples_ms.size(), 3u);
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(wall_ms, 20.0);
  EXPECT_GT(calls, 5 + 10) << "a 4 MiB memset takes microseconds: 20 ms of warmup is many rounds";
}

// Every L2 flush mode runs under the timer (read: the evict_last pass and
// the pass back to normal priority; plain; write), and an unknown mode is
// an error naming --flush.
TEST(GpuRuntime, FlushModes) {
  TC_REQUIRE_GPU();
  rt::Stream s;
  harness::L2Flusher flusher(0);
  DeviceTensor buf(DType::kF32, {int64_t(1) << 20});
  auto fn = [&](CUstream st) { TC_DRV(cuMemsetD8Async, CUdeviceptr(buf.data()), 7, buf.nbytes(), st); };
  harness::TimingSettings ts;
  ts.warmup = 1, ts.repeat = 5, ts.warmup_ms = 0;
  for (const char* mode : {"read", "plain", "write"}) {
    ts.flush = mode;
    EXPECT_EQ(harness::time_cuda(fn, s.get(), ts, &flusher).samples_ms.size(), 5u) << mode;
  }
  ts.flush = "evict";
  TC_EXPECT_ERROR(harness::time_cuda(fn, s.get(), ts, &flusher), ErrorKind::kInvalidArgument, "--flush", "evict");
}

// The clock/power record every CUDA bench carries: NVML ships with the
// driver, so on a GPU machine the counters must be readable, name the device
// CUDA ordinal 0 is (matched by PCI address), and give a sane delta around
// some GPU work.
TEST(GpuRuntime, ClockAndPowerCountersReadable) {
  TC_REQUIRE_GPU();
  std::string why;
  const auto a = harness::read_gpu_counters(0, &why);
  ASSERT_TRUE(a.has_value()) << why;
  ASSERT_TRUE(a->sm_clock_mhz.has_value());
  ASSERT_TRUE(a->max_sm_clock_mhz.has_value());
  EXPECT_GT(*a->max_sm_clock_mhz, 500u);
  EXPECT_LE(*a->sm_clock_mhz, *a->max_sm_clock_mhz + 1);
  // Device work between the readings: 13 bf16 GEMMs of 8192^3.
  std::string note;
  EXPECT_GT(harness::cublas_gemm_tflops(0, 8192, note), 0.0) << note;
  const auto b = harness::read_gpu_counters(0, &why);
  ASSERT_TRUE(b.has_value()) << why;
  const harness::GpuStateDelta d = harness::gpu_state_delta(*a, *b);
  EXPECT_GT(d.seconds, 0.0);
  if (d.avg_power_w) {
    EXPECT_GT(*d.avg_power_w, 10.0);
    EXPECT_LT(*d.avg_power_w, 2000.0);
  }
  if (d.power_w_end) {
    EXPECT_GT(*d.power_w_end, 10.0);
    EXPECT_LT(*d.power_w_end, 2000.0);
  }
  if (d.power_held_ms) {
    EXPECT_LE(*d.power_held_ms, d.seconds * 1e3 + 1);
  }
  if (d.power_limit_w) {  // a board's cap: tens to a few thousand watts
    EXPECT_GT(*d.power_limit_w, 10.0);
    EXPECT_LT(*d.power_limit_w, 5000.0);
  }
  std::printf("%s\n", d.summary().c_str());  // in the device log, for the record
}
