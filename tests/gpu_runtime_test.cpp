// Runtime, JIT launch, device random generator and ceilings on a real GPU.
#include <gtest/gtest.h>

#include <cstring>

#include "test_util.h"
#include "tilecraft/harness/ceilings.h"
#include "tilecraft/harness/random.h"
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
