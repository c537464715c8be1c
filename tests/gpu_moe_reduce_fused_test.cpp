// moe_reduce_fused on the GPU: bitwise against the golden on every smoke case
// and on config sweeps, misaligned pointers, checked mode, bad indices in fast
// mode, CUDA-graph capture and replay.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>

#include "test_util.h"
#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/harness/random.h"
#include "tilecraft/harness/runner.h"
#include "tilecraft/ops/moe_reduce_fused.h"
#include "tilecraft/reference/moe_reduce_fused.h"
#include "tilecraft/runtime/device.h"

using namespace tilecraft;
using namespace tilecraft::harness;

namespace {
std::vector<Case> cases_for(Manifest& m, std::deque<WorkloadSpec>& st, const std::string& tag,
                            const std::string& workload = "") {
  Selection s;
  s.op = "moe_reduce_fused";
  s.tag = tag;
  s.workload = workload;
  return select_cases(m, s, st);
}

// A small random problem on the device plus its golden.
struct Problem {
  HostTensor x, pos, w, out_ref;
  DeviceTensor dx, dpos, dw, dout;
  int64_t T, K, H, E;
  Problem(int64_t T_, int64_t K_, int64_t H_, DType dt, uint64_t seed, int x_offset_elems = 0)
      : T(T_), K(K_), H(H_), E(T_ * K_) {
    x = HostTensor(dt, {E * H + x_offset_elems});
    fill_uniform(x.view(), seed, 1, -1, 1);
    pos = HostTensor(DType::kI32, {T, K});
    for (int64_t i = 0; i < T * K; ++i) pos.ptr<int32_t>()[i] = int32_t((i * 7919) % E);
    w = HostTensor(DType::kF32, {T, K});
    fill_uniform(w.view(), seed, 2, 0, 1);
    dx = DeviceTensor::from_host(x);
    dpos = DeviceTensor::from_host(pos);
    dw = DeviceTensor::from_host(w);
    dout = DeviceTensor(dt, {T, H});
    dout.fill_bytes(0xff);
    out_ref = HostTensor(dt, {T, H});
    reference::MoeReduceFusedRef r{static_cast<char*>(x.data()) + x_offset_elems * dtype_size(dt), dt,
                                   pos.ptr<int32_t>(), w.ptr<float>(), nullptr, nullptr, out_ref.data(), dt,
                                   T, K, H, E};
    reference::moe_reduce_fused_rows(r, 0, T);
    offset = x_offset_elems;
  }
  int offset = 0;
  ops::MoeReduceFusedArgs args() {
    ops::MoeReduceFusedArgs a;
    a.x = TensorView(static_cast<char*>(dx.data()) + offset * dtype_size(x.dtype()), x.dtype(), {E, H},
                     dx.view().device);
    a.token_topk_to_pos = dpos.view();
    a.topk_weights = dw.view();
    a.out = dout.view();
    return a;
  }
  bool matches() {
    HostTensor got = dout.to_host();
    return std::memcmp(got.data(), out_ref.data(), got.nbytes()) == 0;
  }
};
}  // namespace

TEST(GpuMoeReduceFused, SmokeCasesBitwise) {
  TC_REQUIRE_GPU();
  EXPECT_GT(test::expect_manifest_cases_pass("moe_reduce_fused", DeviceType::kCUDA, "smoke"), 100);
}

TEST(GpuMoeReduceFused, ConfigSweepBitwise) {
  TC_REQUIRE_GPU();
  Manifest m = Manifest::load();
  std::deque<WorkloadSpec> st;
  EnvInfo env = capture_env();
  for (const char* w : {"qwen3-30b-a3b-decode", "odd-hidden", "mixtral-decode"})
    for (auto& c : cases_for(m, st, "", w))
      for (int items : {1, 2, 3, 4})
        for (int block : {64, 128, 256}) {
          RunOptions o;
          o.config["items"] = items;
          o.config["block"] = block;
          auto r = run_correctness(c, DeviceType::kCUDA, o, env);
          EXPECT_EQ(r["status"].get<std::string>(), "pass") << "items=" << items << " block=" << block << " " << r.dump();
        }
}

TEST(GpuMoeReduceFused, MisalignedPointerUsesNarrowVectors) {
  TC_REQUIRE_GPU();
  for (int off : {1, 2, 3}) {
    Problem p(37, 5, 1024, DType::kBF16, 99 + uint64_t(off), off);
    rt::Stream s;
    auto cfg = ops::moe_reduce_fused_config(p.args(), {});
    EXPECT_LT(cfg.vec, 8) << "offset " << off;
    ops::moe_reduce_fused(p.args(), s.get());
    s.sync();
    EXPECT_TRUE(p.matches()) << "offset " << off;
  }
}

// An op switches to its tensors' GPU for the call and gives the caller's
// context back: here a second context of the same GPU stands for another
// GPU's (the caller's current one, as torch.cuda.set_device(1) leaves it).
// A stream of that context is refused by name rather than failing inside the
// driver.
TEST(GpuMoeReduceFused, GivesTheCallersContextBack) {
  TC_REQUIRE_GPU();
  Problem p(37, 3, 200, DType::kBF16, 11);
  rt::Stream s;  // the primary context's, like the tensors
  const rt::DriverApi& d = rt::driver();
  CUdevice dev;
  TC_CU(d.cuDeviceGet(&dev, 0));
  CUcontext callers = nullptr;
  TC_CU(d.cuCtxCreate(&callers, nullptr, 0, dev));  // and makes it current
  auto current = [&] {
    CUcontext c = nullptr;
    TC_CU(d.cuCtxGetCurrent(&c));
    return c;
  };
  ops::moe_reduce_fused(p.args(), s.get());
  EXPECT_EQ(current(), callers);
  CUstream theirs = nullptr;
  TC_CU(d.cuStreamCreate(&theirs, CU_STREAM_NON_BLOCKING));
  TC_EXPECT_ERROR(ops::moe_reduce_fused(p.args(), theirs), ErrorKind::kInvalidArgument, "moe_reduce_fused",
                  "'stream'", "a stream of cuda:0", "another GPU");
  EXPECT_EQ(current(), callers);
  TC_CU(d.cuStreamDestroy(theirs));
  // Views that name a GPU this machine lacks (one past the last) are refused
  // by name before any context or launch, and the caller's context stays.
  ops::MoeReduceFusedArgs nowhere = p.args();
  for (TensorView* t : {&nowhere.x, &nowhere.token_topk_to_pos, &nowhere.out}) t->device.index = rt::device_count();
  for (auto* t : {&nowhere.topk_weights, &nowhere.x_sf, &nowhere.sf})
    if (*t) (*t)->device.index = rt::device_count();
  TC_EXPECT_ERROR(ops::moe_reduce_fused(nowhere, s.get()), ErrorKind::kInvalidArgument, "moe_reduce_fused",
                  "'tensors'", "a GPU of this machine");
  EXPECT_EQ(current(), callers);
  TC_CU(d.cuCtxDestroy(callers));
  rt::ensure_context(0);
  s.sync();
  EXPECT_TRUE(p.matches());
}

TEST(GpuMoeReduceFused, CheckedModeReportsBadPosition) {
  TC_REQUIRE_GPU();
  Problem p(16, 4, 256, DType::kBF16, 5);
  p.pos.ptr<int32_t>()[9 * 4 + 2] = int32_t(p.E + 5);
  p.pos.ptr<int32_t>()[12 * 4 + 0] = INT_MAX;
  p.dpos.copy_from(p.pos);
  rt::Stream s;
  ops::MoeReduceFusedOptions o;
  o.checked = true;
  const std::string bad_value = "got " + std::to_string(p.E + 5);  // outlives the check below
  TC_EXPECT_ERROR(ops::moe_reduce_fused(p.args(), s.get(), o), ErrorKind::kIndex, "token 9", "slot 2",
                  bad_value.c_str(), "2 slot(s)");
  // Fast mode skips them without reading: same as the golden, which skips too.
  p.out_ref = HostTensor(DType::kBF16, {p.T, p.H});
  reference::MoeReduceFusedRef r{p.x.data(), DType::kBF16, p.pos.ptr<int32_t>(), p.w.ptr<float>(), nullptr, nullptr,
                                 p.out_ref.data(), DType::kBF16, p.T, p.K, p.H, p.E};
  reference::moe_reduce_fused_rows(r, 0, p.T);
  ops::moe_reduce_fused(p.args(), s.get());
  s.sync();
  EXPECT_TRUE(p.matches());
}

TEST(GpuMoeReduceFused, CpuTensorOnCudaBackendIsAnError) {
  TC_REQUIRE_GPU();
  Problem p(4, 2, 64, DType::kF16, 3);
  auto a = p.args();
  a.token_topk_to_pos = p.pos.view();
  rt::Stream s;
  TC_EXPECT_ERROR(ops::moe_reduce_fused(a, s.get()), ErrorKind::kInvalidArgument, "token_topk_to_pos",
                  "a CUDA tensor", "on cpu");
}

TEST(GpuMoeReduceFused, CudaGraphCaptureAndReplay) {
  TC_REQUIRE_GPU();
  Problem p(300, 8, 2048, DType::kBF16, 11);
  rt::Stream s;
  ops::moe_reduce_fused(p.args(), s.get());  // compile + load outside the capture
  s.sync();
  p.dout.fill_bytes(0xff);
  const auto& d = rt::driver();
  TC_CU(d.cuStreamBeginCapture(s.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  ops::moe_reduce_fused(p.args(), s.get());
  CUgraph g;
  TC_CU(d.cuStreamEndCapture(s.get(), &g));
  CUgraphExec ge;
  TC_CU(d.cuGraphInstantiate(&ge, g, 0));
  EXPECT_FALSE(p.matches()) << "capture must not have executed the op";
  for (int i = 0; i < 3; ++i) {
    p.dout.fill_bytes(0xff);
    TC_CU(d.cuGraphLaunch(ge, s.get()));
    s.sync();
    EXPECT_TRUE(p.matches()) << "replay " << i;
  }
  d.cuGraphExecDestroy(ge);
  d.cuGraphDestroy(g);
}

// moe_topk_gate against its golden on every smoke case (near-ties allowed).
TEST(GpuMoeTopkGate, SmokeCases) {
  TC_REQUIRE_GPU();
  EXPECT_GT(test::expect_manifest_cases_pass("moe_topk_gate", DeviceType::kCUDA), 10);
}

// moe_fused_mapping: bitwise equal to the golden on every smoke case.
TEST(GpuMoeFusedMapping, SmokeCasesBitwise) {
  TC_REQUIRE_GPU();
  EXPECT_GT(test::expect_manifest_cases_pass("moe_fused_mapping", DeviceType::kCUDA), 10);
}

// The several-block path (count, then place) gives the golden's bits at any
// block count: uneven segments, more blocks than slots (T = 1, T = 0), E up
// to 1024, dropped slots, block_m = 1.
TEST(GpuMoeFusedMapping, SeveralBlocksBitwise) {
  TC_REQUIRE_GPU();
  for (int blocks : {1, 2, 3, 7, 64})
    EXPECT_GT(test::expect_manifest_cases_pass("moe_fused_mapping", DeviceType::kCUDA, "", {{"blocks", blocks}}), 10)
        << blocks << " blocks";
  EXPECT_GT(test::expect_manifest_cases_pass("fused_moe", DeviceType::kCUDA, "", {{"mapping_blocks", 3}}), 8);
}
