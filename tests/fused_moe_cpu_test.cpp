// The fused MoE layer without a GPU: its smoke cases on the CPU backend, the
// argument checks, the path and kernel choices of the chain and the kernels
// it compiles for sm_90a; the launch counters it owns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <set>
#include <vector>

#include "moe_test_args.h"
#include "ops/moe/decode_split.h"
#include "ops/moe/launch_counters.h"
#include "test_util.h"
#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/harness/random.h"
#include "tilecraft/harness/runner.h"
#include "tilecraft/jit/compiler.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/ops/fused_moe.h"
#include "tilecraft/ops/moe_fused_mapping.h"
#include "tilecraft/ops/moe_grouped_gemm.h"
#include "tilecraft/reference/fused_moe.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

using namespace tilecraft;
using namespace tilecraft::test;

TEST(FusedMoeCpu, SmokeCases) { EXPECT_GT(test::expect_manifest_cases_pass("fused_moe", DeviceType::kCPU), 8); }

namespace {
// The layer's kernels for an sm_90a GPU of 132 SMs (the H200): the same list
// on every machine these tests run on, with a GPU or without, whatever its
// kind (the default arguments would take the GPU at hand's).
std::vector<jit::KernelSpec> sm90_specs(const ops::FusedMoeArgs& a, const ops::FusedMoeParams& p,
                                        const ops::FusedMoeOptions& o = {}) {
  return ops::fused_moe_kernel_specs(a, p, o, 9, 132);
}
}  // namespace

namespace {
// Host tensors for a small layer; views can be bent per test.
struct HostLayer {
  int64_t T = 4, H = 64, I = 32, E = 8, K = 2;
  DType dt = DType::kBF16;
  HostTensor x{dt, {T, H}}, wr{dt, {E, H}}, wg{dt, {E, I, H}}, wu{dt, {E, I, H}}, wd{dt, {E, H, I}}, out{dt, {T, H}};
  ops::FusedMoeArgs args() const {
    return stacked_layer_args(x.view(), wr.view(), wg.view(), wu.view(), wd.view(), out.view());
  }
  ops::FusedMoeParams params() const {
    ops::FusedMoeParams p;
    p.top_k = int(K);
    return p;
  }
};
}  // namespace

// An unknown routing kind is refused with every kind the layer takes,
// "router" (routing computed by the layer) among them.
TEST(FusedMoeCpu, UnknownRoutingNamesEveryKind) {
  const harness::Manifest m = harness::Manifest::load();
  harness::Selection s;
  s.op = "fused_moe";
  s.shapes = {"T=4,H=64,I=32,E=8,K=2,dtype=bf16,routing=route"};
  std::deque<harness::WorkloadSpec> storage;
  const auto cases = harness::select_cases(m, s, storage);
  ASSERT_FALSE(cases.empty());
  const std::string op = "fused_moe";  // named: no reference bound through a temporary (g++ 13 warns)
  TC_EXPECT_ERROR(harness::adapter_for(op).generate(cases[0]), ErrorKind::kInvalidArgument, "fused_moe",
                  "routing 'route'", "uniform", "dropped", "router");
}

TEST(FusedMoeCpu, ArgumentErrorsNameTheArgument) {
  HostLayer L;
  EXPECT_NO_THROW(ops::validate_fused_moe(L.args(), L.params(), DeviceType::kCPU));
  {  // E not a multiple of the group count
    auto p = L.params();
    p.gate.mode = ops::GateMode::kSigmoidGroupedTopk;
    p.gate.n_group = 3;
    TC_EXPECT_ERROR(ops::validate_fused_moe(L.args(), p, DeviceType::kCPU), ErrorKind::kInvalidArgument, "fused_moe",
                    "n_group", "a divisor of E = 8", "3");
  }
  {  // top_k beyond the experts
    auto p = L.params();
    p.top_k = 9;
    TC_EXPECT_ERROR(ops::validate_fused_moe(L.args(), p, DeviceType::kCPU), ErrorKind::kInvalidArgument, "top_k", "9");
  }
  {  // wrong dtype
    HostTensor x32(DType::kF32, {L.T, L.H});
    auto a = L.args();
    a.x = x32.view();
    TC_EXPECT_ERROR(ops::validate_fused_moe(a, L.params(), DeviceType::kCPU), ErrorKind::kType, "fused_moe", "'x'",
                    "fp16 or bf16", "fp32");
  }
  {  // gate weights of the wrong shape
    HostTensor bad(L.dt, {L.E, L.I, L.H + 1});
    auto a = L.args();
    a.w_gate.stacked = bad.view();
    TC_EXPECT_ERROR(ops::validate_fused_moe(a, L.params(), DeviceType::kCPU), ErrorKind::kInvalidArgument, "w_gate",
                    "[32, 64]", "[32, 65]");
  }
  {  // a down projection of another expert count
    HostTensor bad(L.dt, {L.E - 1, L.H, L.I});
    auto a = L.args();
    a.w_down.stacked = bad.view();
    TC_EXPECT_ERROR(ops::validate_fused_moe(a, L.params(), DeviceType::kCPU), ErrorKind::kInvalidArgument, "w_down",
                    "8 experts", "7 experts");
  }
  {  // mixed layouts
    auto a = L.args();
    HostTensor kn(L.dt, {L.E, L.H, L.I});
    a.w_up.stacked = kn.view();
    a.w_up.layout = ops::WeightLayout::kKN;
    TC_EXPECT_ERROR(ops::validate_fused_moe(a, L.params(), DeviceType::kCPU), ErrorKind::kInvalidArgument, "w_up",
                    "NK layout");
  }
  {  // given routing without the routing
    auto p = L.params();
    p.given_routing = true;
    TC_EXPECT_ERROR(ops::validate_fused_moe(L.args(), p, DeviceType::kCPU), ErrorKind::kInvalidArgument, "ids");
  }
  {  // a CPU tensor on the CUDA backend
    TC_EXPECT_ERROR(ops::validate_fused_moe(L.args(), L.params(), DeviceType::kCUDA), ErrorKind::kInvalidArgument,
                    "'x'", "a CUDA tensor");
  }
  {  // --config keys of the layer: values out of range name the key
    EXPECT_EQ(ops::fused_moe_options({{"gate_tokens_per_block", 4}}, "--config").gate_tokens_per_block, 4);
    TC_EXPECT_ERROR(ops::fused_moe_options({{"gate_tokens_per_block", 33}}, "--config"), ErrorKind::kInvalidArgument,
                    "--config", "gate_tokens_per_block", "1..32", "33");
    TC_EXPECT_ERROR(ops::fused_moe_options({{"mapping_blocks", -1}}, "--config"), ErrorKind::kInvalidArgument,
                    "mapping_blocks 0 (choose)", "-1");
    // (the mapping op's own limit, so a listing or compile refuses it, not only a run)
    EXPECT_EQ(ops::fused_moe_options({{"mapping_blocks", 1024}}, "--config").mapping_blocks, 1024);
    TC_EXPECT_ERROR(ops::fused_moe_options({{"mapping_blocks", 1025}}, "--config"), ErrorKind::kInvalidArgument,
                    "up to 1024 blocks", "1025");
    EXPECT_EQ(ops::fused_moe_options({{"router_split", 0}}, "--config").router_split, 0);
    EXPECT_EQ(ops::fused_moe_options({{"fused_combine", 1}}, "--config").fused_combine, 1);
    EXPECT_EQ(ops::fused_moe_options({}, "--config").fused_combine, -1);
    TC_EXPECT_ERROR(ops::fused_moe_options({{"fused_combine", 2}}, "--config"), ErrorKind::kInvalidArgument, "--config",
                    "fused_combine 0", "1 (fused into it)", "2");
    // router_KEY: the router GEMM's own overrides; plain keys do not reach it.
    const ops::FusedMoeOptions r = ops::fused_moe_options({{"router_block_n", 64}, {"router_k_splits", 8}}, "--config");
    ASSERT_TRUE(r.router.has_value());
    EXPECT_EQ(r.router->block_n, 64);
    EXPECT_EQ(r.router->k_splits, 8);
    EXPECT_FALSE(ops::fused_moe_options({{"block_n", 64}}, "--config").router.has_value());
    TC_EXPECT_ERROR(ops::fused_moe_options({{"router_blocks_n", 64}}, "--config"), ErrorKind::kInvalidArgument,
                    "blocks_n");
    TC_EXPECT_ERROR(ops::fused_moe_options({{"router_split", 1}}, "--config"), ErrorKind::kInvalidArgument, "--config",
                    "router_split 0", "-1 (choose", "1");
    // An unknown key: the error lists the layer's keys and the grouped GEMM's.
    TC_EXPECT_ERROR(ops::fused_moe_options({{"decode_splt", 1}}, "--config"), ErrorKind::kInvalidArgument,
                    "'decode_splt'", "decode_split_pool", "block_m", "gate_up_");
  }
}

namespace {
// The layer's arguments as stand-in device tensors of T tokens: only shapes
// and alignment matter (nothing runs), for the kernels the layer would compile.
struct StandInLayer {
  HostLayer L;
  HostTensor x, out;
  explicit StandInLayer(int64_t T) : x(L.dt, {T, L.H}), out(L.dt, {T, L.H}) { L.T = T; }
  ops::FusedMoeArgs args() const {
    auto cuda = [](TensorView t) {
      t.device = Device{DeviceType::kCUDA, 0};
      t.data = reinterpret_cast<void*>(uintptr_t(1) << 20);
      return t;
    };
    auto a = L.args();
    a.x = cuda(x.view());
    a.out = cuda(out.view());
    a.w_router = cuda(a.w_router);
    a.w_gate.stacked = cuda(*a.w_gate.stacked);
    a.w_up.stacked = cuda(*a.w_up.stacked);
    a.w_down.stacked = cuda(*a.w_down.stacked);
    return a;
  }
};
}  // namespace

// Tensors on two GPUs: refused before anything launches, naming the
// argument off the first tensor's GPU (a kernel on one GPU faults on, or
// silently reads, another's memory). The stacked and per-row tensors alike.
TEST(FusedMoeCpu, TensorsOnAnotherGpuAreRefused) {
  const StandInLayer S(64);
  EXPECT_NO_THROW(ops::validate_fused_moe(S.args(), S.L.params(), DeviceType::kCUDA));
  auto a = S.args();
  a.w_down.stacked->device.index = 1;
  TC_EXPECT_ERROR(ops::validate_fused_moe(a, S.L.params(), DeviceType::kCUDA), ErrorKind::kInvalidArgument,
                  "fused_moe", "'w_down'", "a tensor on cuda:0", "on cuda:1");
  a = S.args();
  a.x.device.index = 1;  // the first tensor sets the GPU: now every other one is off it
  TC_EXPECT_ERROR(ops::validate_fused_moe(a, S.L.params(), DeviceType::kCUDA), ErrorKind::kInvalidArgument,
                  "'w_router'", "a tensor on cuda:1", "on cuda:0");
  a = S.args();
  a.out.device.index = 3;
  TC_EXPECT_ERROR(ops::validate_fused_moe(a, S.L.params(), DeviceType::kCUDA), ErrorKind::kInvalidArgument,
                  "'out'", "on cuda:3");
  // The CPU backend has one device: indices do not matter there.
  ops::FusedMoeArgs host = S.L.args();
  host.out.device.index = 2;
  EXPECT_NO_THROW(ops::validate_fused_moe(host, S.L.params(), DeviceType::kCPU));
}

// Past 64 experts by pointer the layer's GEMMs read their weight maps from
// global memory, so its kernel list holds the kernel that writes them
// (compile and precompile build it); up to 64, and stacked, it does not.
TEST(FusedMoeCpu, PerExpertPointersPastTheParamsListTheMapsKernel) {
  for (const int64_t E : {64, 128}) {
    ops::FusedMoeArgs a = shape_only_layer(4096, E, 2048, 768);
    auto count = [](const std::vector<jit::KernelSpec>& specs) {
      int n = 0;
      for (const auto& s : specs) n += s.function == "tc::moe::build_tma_maps_kernel";
      return n;
    };
    ops::FusedMoeParams p;
    p.top_k = 8;
    EXPECT_EQ(count(sm90_specs(a, p)), 0) << "stacked, E = " << E;
    for (ops::ExpertWeights* w : {&a.w_gate, &a.w_up, &a.w_down}) {
      const TensorView st = *w->stacked;
      w->stacked.reset();
      for (int64_t e = 0; e < E; ++e) w->per_expert.push_back(shape_only(DType::kBF16, {st.shape[1], st.shape[2]}));
    }
    EXPECT_EQ(count(sm90_specs(a, p)), E > 64 ? 2 : 0) << "by pointer (both projections), E = " << E;
  }
}

TEST(FusedMoeCpu, KernelsForSm90a) {
  const StandInLayer S(4096);
  const HostLayer& L = S.L;
  const auto a = S.args();
  // 8192 slots: the mapping spreads over several blocks (count, place), so
  // the gate runs alone: router GEMM, gate, count, place, gate/up, down,
  // combine.
  const auto specs = sm90_specs(a, L.params());
  ASSERT_EQ(specs.size(), 7u);
  EXPECT_EQ(specs[1].function, "tc::moe::topk_gate_kernel");
  EXPECT_EQ(specs[2].function, "tc::moe::mapping_count_kernel");
  EXPECT_EQ(specs[3].function, "tc::moe::mapping_scatter_kernel");
  EXPECT_NE(specs[4].config.find("wgmma"), std::string::npos) << specs[4].config;
  EXPECT_NE(specs[4].config.find("silu*up"), std::string::npos) << specs[4].config;
  // For an sm_80 target: mma.sync tiles, no wgmma anywhere.
  for (const jit::KernelSpec& spec : ops::fused_moe_kernel_specs(a, L.params(), {}, 8))
    EXPECT_EQ(spec.config.find("wgmma"), std::string::npos) << spec.config;
  // On one block: router GEMM, gate + mapping (the layer's launch), gate and
  // mapping alone (stage timings), gate/up, down, combine.
  ops::FusedMoeOptions one;
  one.mapping_blocks = 1;
  const auto fused = sm90_specs(a, L.params(), one);
  ASSERT_EQ(fused.size(), 7u);
  EXPECT_EQ(fused[1].function, "tc::moe::topk_gate_mapping_kernel");
  EXPECT_EQ(fused[3].function, "tc::moe::fused_mapping_kernel");
  EXPECT_GT(ops::fused_moe_workspace_bytes(a, L.params()), size_t(L.T * L.K * (L.H + L.I) * 2));
}

// The gate + mapping kernel under the compile option `trace`: it compiles
// for sm_90a without spills and its binary holds the stamp buffer the host
// looks up (tc_trace_stamps); without the option the buffer is absent.
TEST(FusedMoeCpu, GateMappingTraceStampsCompileIn) {
  const StandInLayer S(4096);
  ops::FusedMoeOptions one;
  one.mapping_blocks = 1;
  const auto specs = sm90_specs(S.args(), S.L.params(), one);
  ASSERT_GE(specs.size(), 2u);
  ASSERT_EQ(specs[1].function, "tc::moe::topk_gate_mapping_kernel");
  const auto traced = jit::compile(specs[1], jit::CompileOptions::parse("release,trace"), "sm_90a");
  const auto plain = jit::compile(specs[1], {}, "sm_90a");
  EXPECT_EQ(traced->resources.spill_store_bytes, 0);
  EXPECT_NE(traced->cubin.find("tc_trace_stamps"), std::string::npos);
  EXPECT_EQ(plain->cubin.find("tc_trace_stamps"), std::string::npos);
  EXPECT_NE(traced->key, plain->key);
}

// Every kernel of five layer listings (DeepSeek-V3 T = 4096: the
// warp-specialised GEMMs with and without CTA pairs, the multi-block
// mapping; T = 256: the gate + mapping kernel and the gate and mapping
// apart; Qwen3-30B T = 1: the register GEMV and its fused combine;
// DeepSeek-V3 T = 1: the one-kernel decode path, and with decode_split = 0
// the bulk-copy GEMV) compiles under the option `trace` for sm_90a without
// spills, and every kernel with trace slots holds the stamp buffer (so does
// any other kernel whose header includes tile/trace.cuh: its buffer stays
// zero and take_traces skips it).
TEST(FusedMoeCpu, TracedKernelsCompileWithoutSpills) {
  struct Listing {
    int64_t T, H, I, E;
    int decode_split;
  };
  const std::set<std::string> stamped = {
      "tc::moe::grouped_gemm_sm90_ws_kernel", "tc::moe::grouped_gemv_kernel", "tc::moe::grouped_gemv_combine_kernel",
      "tc::moe::grouped_gemv_bulk_kernel",    "tc::moe::topk_gate_kernel",    "tc::moe::topk_gate_mapping_kernel",
      "tc::moe::fused_mapping_kernel",        "tc::moe::decode_split_kernel"};
  std::set<std::string> seen;
  const auto traced = jit::CompileOptions::parse("release,trace");
  for (const Listing& l :
       {Listing{4096, 7168, 2048, 256, -1}, Listing{256, 7168, 2048, 256, -1}, Listing{1, 2048, 768, 128, -1},
        Listing{1, 7168, 2048, 256, -1}, Listing{1, 7168, 2048, 256, 0}}) {
    const ops::FusedMoeArgs a = shape_only_layer(l.T, l.E, l.H, l.I);
    ops::FusedMoeParams p;
    p.top_k = 8;
    ops::FusedMoeOptions o;
    o.decode_split = l.decode_split;
    for (const jit::KernelSpec& spec : ops::fused_moe_kernel_specs(a, p, o, 9)) {
      SCOPED_TRACE(::testing::Message() << "T=" << l.T << " H=" << l.H << " " << spec.function << " [" << spec.config
                                        << "]");
      const auto k = jit::compile(spec, traced, "sm_90a");
      EXPECT_EQ(k->resources.spill_store_bytes, 0);
      if (stamped.count(spec.function)) {
        EXPECT_NE(k->cubin.find("tc_trace_stamps"), std::string::npos);
      }
      seen.insert(spec.function);
    }
  }
  for (const std::string& f : stamped) EXPECT_TRUE(seen.count(f)) << f << " not in the listings";
}

// decode_split=1 (the one-kernel decode path, sm_90): its two kernels
// compile without spills; asked for where it cannot
// run (sm_80, T = 2, I not a multiple of 128, per-expert weights), an
// error naming decode_split and why.
TEST(FusedMoeCpu, DecodeSplitKernelsAndErrors) {
  const int64_t H = 256, I = 256, E = 8;
  auto cuda = [](TensorView t) {
    t.device = Device{DeviceType::kCUDA, 0};
    t.data = reinterpret_cast<void*>(uintptr_t(1) << 20);
    return t;
  };
  auto layer = [&](int64_t T, int64_t i, std::vector<HostTensor>& keep) {
    keep = {HostTensor(DType::kBF16, {T, H}),    HostTensor(DType::kBF16, {E, H}),
            HostTensor(DType::kBF16, {E, i, H}), HostTensor(DType::kBF16, {E, i, H}),
            HostTensor(DType::kBF16, {E, H, i}), HostTensor(DType::kBF16, {T, H})};
    ops::FusedMoeArgs a;
    a.x = cuda(keep[0].view()), a.w_router = cuda(keep[1].view());
    a.w_gate.stacked = cuda(keep[2].view()), a.w_up.stacked = cuda(keep[3].view());
    a.w_down.stacked = cuda(keep[4].view()), a.out = cuda(keep[5].view());
    return a;
  };
  ops::FusedMoeParams p;
  p.top_k = 2;
  std::vector<HostTensor> keep;
  ops::FusedMoeOptions split;
  split.decode_split = 1;
  // The router GEMM's two kernels come first (on 132 SMs it splits K and
  // adds its reduce), then the gate, then the two decode-split kernels.
  const auto specs = sm90_specs(layer(1, I, keep), p, split);
  ASSERT_EQ(specs.size(), 5u);
  EXPECT_EQ(specs[2].function, "tc::moe::topk_gate_kernel");
  const jit::KernelSpec& streaming = specs[specs.size() - 2];
  EXPECT_EQ(streaming.function, "tc::moe::decode_split_kernel");
  EXPECT_EQ(specs.back().function, "tc::moe::decode_split_combine_kernel");
  // Its weight copies (gate and up pieces, own and pool down boxes) go
  // evict-first, so the partials stay in L2 for the combine (H200, session
  // 27: DeepSeek-V3 T=1 experts 1 us and the layer 3 us faster); x does not.
  {
    const std::string ptx = jit::nvrtc_compile(streaming, {}, "compute_90a").binary;
    EXPECT_NE(ptx.find("createpolicy.fractional.L2::evict_first"), std::string::npos);
    size_t hinted = 0;
    for (size_t at = ptx.find(".L2::cache_hint"); at != std::string::npos; at = ptx.find(".L2::cache_hint", at + 1))
      ++hinted;
    EXPECT_EQ(hinted, 4u) << "two bulk copies and two tensor copies";
  }
  ops::FusedMoeOptions balanced = split;
  balanced.decode_split = 2;
  const auto bspecs = sm90_specs(layer(1, I, keep), p, balanced);
  ASSERT_EQ(bspecs.size(), specs.size());
  EXPECT_EQ(bspecs[bspecs.size() - 2].function, "tc::moe::decode_split_balanced_kernel");
  for (const jit::KernelSpec& s : {streaming, specs.back(), bspecs[bspecs.size() - 2]}) {
    const auto k = jit::compile(s, {}, "sm_90a");
    EXPECT_EQ(k->resources.spill_store_bytes, 0) << s.function;
    EXPECT_EQ(k->resources.stack_frame_bytes, 0) << s.function;
  }
  TC_EXPECT_ERROR(ops::fused_moe_kernel_specs(layer(1, I, keep), p, split, 8), ErrorKind::kInvalidArgument,
                  "decode_split", "sm_8x");
  TC_EXPECT_ERROR(sm90_specs(layer(1, 100, keep), p, split), ErrorKind::kInvalidArgument, "decode_split",
                  "mapped path");  // I = 100: no decode path
  split.decode = 1;
  TC_EXPECT_ERROR(sm90_specs(layer(2, I, keep), p, split), ErrorKind::kInvalidArgument, "decode_split", "T = 2");
  TC_EXPECT_ERROR(ops::fused_moe_options({{"decode_split", 3}}, "--config"), ErrorKind::kInvalidArgument,
                  "decode_split", "3");
  // Box heights: a multiple of 8 up to 256, and at least a gate/up column
  // pair (4 H bytes) per stage.
  TC_EXPECT_ERROR(ops::fused_moe_options({{"decode_split_box_rows", 12}}, "--config"), ErrorKind::kInvalidArgument,
                  "decode_split_box_rows", "12");
  TC_EXPECT_ERROR(ops::fused_moe_options({{"decode_split_box_rows", 264}}, "--config"), ErrorKind::kInvalidArgument,
                  "decode_split_box_rows", "264");
  split.decode = -1;
  split.decode_split_cols = 128;
  split.decode_split_box_rows = 8;  // H = 256: 1 KB of gate/up per column, a 2 KB stage holds it
  EXPECT_EQ(sm90_specs(layer(1, I, keep), p, split).back().function, "tc::moe::decode_split_combine_kernel");
  TC_EXPECT_ERROR(ops::fused_moe_options({{"decode_split_cols", 12}}, "--config"), ErrorKind::kInvalidArgument,
                  "decode_split_cols", "12");
}

// The plan: the slice width whose (slot, slice) units fill 132 SMs' waves
// best, the widest of equals; box heights for stages of about 32 KB that
// hold whole gate/up pieces; requested values checked against H and I.
TEST(FusedMoeCpu, DecodeSplitPlan) {
  struct Case {
    const char* model;
    int64_t K, H, I;
    int asked, cols, box_rows, stages, gu_cols;
    int64_t units;
  };
  // Asked-for widths: the ones that make 128 units where 128 columns make fewer.
  for (const Case& c : {Case{"deepseek-v3", 8, 7168, 2048, 0, 128, 112, 7, 1, 128},  // 28 KB: one column pair
                        Case{"qwen3-235b", 8, 4096, 1536, 96, 96, 176, 6, 2, 128},   // 33 KB: two
                        Case{"qwen3-30b", 8, 2048, 768, 48, 48, 256, 8, 3, 128}}) {  // 24 KB (256 rows at most)
    const ops::DecodeSplitPlan p = ops::decode_split_plan(c.K, c.H, c.I, 132, c.asked, 0);
    EXPECT_EQ(p.cols, c.cols) << c.model;
    EXPECT_EQ(p.box_rows, c.box_rows) << c.model;
    EXPECT_EQ(p.stages, c.stages) << c.model;
    EXPECT_EQ(p.gu_cols, c.gu_cols) << c.model;
    EXPECT_EQ(p.units, c.units) << c.model;
    EXPECT_GE(p.fill, 0.96) << c.model;
    EXPECT_EQ(p.workspace_bytes, size_t(c.units * (c.H + c.cols) * 4)) << c.model;
    EXPECT_EQ(p.grid, std::min<int64_t>(c.units, 132)) << c.model;
    EXPECT_EQ(p.boxes, (c.H + c.box_rows - 1) / c.box_rows) << c.model;
    EXPECT_EQ(p.pool_boxes, p.boxes / 8) << c.model;  // an eighth unless asked (8 of 64 at DeepSeek-V3)
    EXPECT_GE(int64_t(p.box_rows) * p.cols * 2, 4 * c.H) << c.model << ": a stage holds a gate/up column pair";
  }
  EXPECT_EQ(ops::decode_split_plan(8, 7168, 2048, 132, 64, 0).cols, 64);
  // 128 columns where they divide I, whatever the fill (Mixtral: 224 units,
  // Qwen3-30B: 48); else the best fill (I = 1000: 40 columns, 200 units).
  EXPECT_EQ(ops::decode_split_plan(2, 4096, 14336, 132, 0, 0).cols, 128);
  EXPECT_EQ(ops::decode_split_plan(8, 2048, 768, 132, 0, 0).units, 48);
  EXPECT_EQ(ops::decode_split_plan(8, 4096, 1000, 132, 0, 0).cols, 40);
  TC_EXPECT_ERROR(ops::decode_split_plan(8, 7168, 2048, 132, 40, 0), ErrorKind::kInvalidArgument, "decode_split_cols",
                  "40");  // does not divide I
  TC_EXPECT_ERROR(ops::decode_split_plan(8, 7168, 2048, 132, 48, 0), ErrorKind::kInvalidArgument, "decode_split_cols",
                  "48");  // under H / 128 = 56: no box holds a column pair
  TC_EXPECT_ERROR(ops::decode_split_plan(8, 7168, 2048, 132, 0, 104), ErrorKind::kInvalidArgument,
                  "decode_split_box_rows", "[112, 256]");
  EXPECT_EQ(ops::decode_split_plan(8, 7168, 2048, 132, 0, 0).pool_boxes, 8);       // of 64 boxes of 112 rows
  EXPECT_EQ(ops::decode_split_plan(8, 7168, 2048, 132, 0, 0, 0).pool_boxes, 0);    // none when asked
  EXPECT_EQ(ops::decode_split_plan(8, 7168, 2048, 132, 0, 0, 63).pool_boxes, 63);  // all but one
  TC_EXPECT_ERROR(ops::decode_split_plan(8, 7168, 2048, 132, 0, 0, 64), ErrorKind::kInvalidArgument,
                  "decode_split_pool", "64");
  TC_EXPECT_ERROR(ops::fused_moe_options({{"decode_split_pool", -2}}, "--config"), ErrorKind::kInvalidArgument,
                  "decode_split_pool", "-2");
  // decode_split = 2: one CTA per SM, no pool, at most 512 columns of h
  // each; its down items are the full rows that fill a stage (112 x 128
  // elements: 7 rows of 2048), and I must fit a stage.
  const ops::DecodeSplitPlan b = ops::decode_split_plan(8, 7168, 2048, 132, 0, 0, -1, true);
  EXPECT_TRUE(b.balanced);
  EXPECT_EQ(b.grid, 132);
  EXPECT_EQ(b.pool_boxes, 0);
  EXPECT_EQ(b.down_rows, 7);
  EXPECT_EQ(ops::decode_split_plan(4, 512, 336, 132, 48, 24, -1, true).down_rows, 3);  // 1152-element stages
  TC_EXPECT_ERROR(ops::decode_split_plan(2, 7168, 14464, 132, 0, 0, -1, true), ErrorKind::kInvalidArgument,
                  "decode_split", "I = 14464");  // 14336-element stages
  TC_EXPECT_ERROR(ops::decode_split_plan(33, 512, 64, 132, 0, 0, -1, true), ErrorKind::kInvalidArgument, "decode_split",
                  "top_k = 33");
  EXPECT_EQ(ops::decode_split_plan(8, 7168, 2048, 132, 0, 0).grid, 128);  // one CTA per unit
  TC_EXPECT_ERROR(ops::decode_split_plan(8, 7168, 2048, 132, 0, 0, 4, true), ErrorKind::kInvalidArgument,
                  "decode_split_pool", "decode_split=2");
  TC_EXPECT_ERROR(ops::decode_split_plan(8, 7168, 2048, 16, 0, 0, -1, true), ErrorKind::kInvalidArgument,
                  "decode_split", "1024 columns per SM");
}

// 9..64 rows per expert: on sm_90 (what kernel listings assume without a
// GPU) both projections take 64-row tiles on the warp-specialised kernel;
// the mapping pads to 64. Elsewhere the arch-neutral heights (here 32).
TEST(FusedMoeCpu, MidSizeBatchesTake64RowWgmmaTiles) {
  const StandInLayer S(64);  // 64 tokens x top-2 over 8 experts: 16 rows per expert
  const auto specs = sm90_specs(S.args(), S.L.params());
  int ws64 = 0;
  for (const jit::KernelSpec& spec : specs) ws64 += spec.config.find("wgmma-ws bm=64") != std::string::npos;
  EXPECT_EQ(ws64, 2) << "gate/up and down on 64-row warp-specialised tiles";
  if (!rt::driver_available()) {
    EXPECT_EQ(ops::fused_moe_block_m(S.args(), S.L.params()), 32);
  }
}

// 256 experts at one 128-row tile each (T = 4096, top-8: DeepSeek-V3's
// prefill shape, small H and I) run the gate/up projection on CTA pairs and
// the down projection on one CTA per tile; at half a tile per expert
// (T = 2048) neither pairs.
TEST(FusedMoeCpu, DeepSeekLikePrefillPairsTheGateUp) {
  for (auto [T, want] : {std::pair<int64_t, int>{4096, 1}, std::pair<int64_t, int>{2048, 0}}) {
    const ops::FusedMoeArgs a = shape_only_layer(T, 256, 64, 32);
    ops::FusedMoeParams p;
    p.top_k = 8;
    int pairs = 0, gated_pairs = 0;
    for (const jit::KernelSpec& spec : sm90_specs(a, p)) {
      const bool paired = spec.config.find("cta-pairs") != std::string::npos;
      pairs += paired;
      gated_pairs += paired && spec.config.find("silu") != std::string::npos;
    }
    EXPECT_EQ(pairs, want) << "T = " << T;
    EXPECT_EQ(gated_pairs, want) << "T = " << T;
  }
}

// The router GEMM ([T, H] x [E, H]^T) at 132 SMs, where the grouped GEMM's
// own 128-row tiles fill less than half of them: on sm_90, warp-specialised
// 64 x 128 tiles where those number at least a fifth of the SMs (DeepSeek-V3
// T = 1024..8192, Qwen3-30B T = 4096); else, where 64 x 64 tiles (16 or 32
// rows at T <= 32) fill at most half the SMs, mma.sync with K split until
// tiles x slices fill them (DeepSeek-V3 T = 1: 4 tiles, 33 slices of 112
// k-steps; on sm_80 also T = 1024); rows not on 16 bytes (H = 7170) never
// ask for wgmma. Every chosen config resolves and compiles without spills;
// past that, and with router_split = 0, the grouped GEMM's own choice (no
// overrides).
TEST(FusedMoeCpu, RouterGemmSplitsKOverTheSms) {
  auto view = [](DType t, std::initializer_list<int64_t> shape) { return shape_only(t, Shape(shape)); };
  struct Case {
    int64_t T, H, E;
    int cc, sm90, block_m, k_splits;  // sm90 -1: no override (then block_m 0, k_splits 0)
  };
  for (const Case& c :
       {Case{1, 7168, 256, 9, 0, 16, 33}, Case{16, 7168, 256, 9, 0, 16, 33}, Case{32, 7168, 256, 9, 0, 32, 33},
        Case{256, 7168, 256, 9, 0, 64, 8}, Case{512, 7168, 256, 9, 0, 64, 4}, Case{1024, 7168, 256, 9, 2, 64, 0},
        Case{1024, 7168, 256, 8, 0, 64, 2}, Case{2048, 7168, 256, 9, 2, 64, 0}, Case{4096, 7168, 256, 9, 2, 64, 0},
        Case{8192, 7168, 256, 9, 2, 64, 0}, Case{16384, 7168, 256, 9, -1, 0, 0}, Case{4096, 2048, 128, 9, 2, 64, 0},
        Case{2048, 7170, 256, 9, -1, 0, 0}, Case{2048, 7168, 256, 8, -1, 0, 0}, Case{1, 2048, 128, 9, 0, 16, 16},
        Case{4, 4096, 8, 9, 0, 16, 32}, Case{32768, 7168, 8, 9, -1, 0, 0}, Case{1, 128, 256, 9, -1, 0, 0}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << c.T << " H=" << c.H << " E=" << c.E << " sm_" << c.cc << "0");
    const ops::FusedMoeArgs a = shape_only_layer(c.T, c.E, c.H, 64);
    ops::FusedMoeParams p;
    p.top_k = 1;
    const ops::MoeGroupedGemmConfig r = ops::fused_moe_router_config(a, p, {}, 132, c.cc);
    EXPECT_EQ(r.sm90, c.sm90);
    EXPECT_EQ(r.block_m, c.block_m);
    EXPECT_EQ(r.k_splits, c.k_splits);
    ops::FusedMoeOptions off;
    off.router_split = 0;
    const ops::MoeGroupedGemmConfig d = ops::fused_moe_router_config(a, p, off, 132, c.cc);
    EXPECT_EQ(d.block_m, 0);
    EXPECT_EQ(d.k_splits, 0);
    EXPECT_EQ(d.sm90, -1);
    if (c.sm90 < 0) continue;
    EXPECT_EQ(r.block_n, c.sm90 == 2 ? 128 : 64);
    // The router GEMM as the layer builds it: one stacked [1, E, H] group, fp32 logits.
    ops::MoeGroupedGemmArgs g;
    g.a = a.x;
    g.w.stacked = shape_only(DType::kBF16, Shape{1, c.E, c.H});
    g.out = view(DType::kF32, {c.T, c.E});
    const ops::MoeGroupedGemmConfig cfg = ops::moe_grouped_gemm_config(g, r, c.cc, 132);
    EXPECT_EQ(cfg.sm90, c.sm90);
    EXPECT_EQ(cfg.block_m, c.block_m);
    EXPECT_EQ(cfg.k_splits, std::max(c.k_splits, 1));
    const char* arch = c.cc == 9 ? "sm_90a" : "sm_80";
    EXPECT_EQ(jit::compile(ops::moe_grouped_gemm_kernel_spec(g, cfg), {}, arch)->resources.spill_store_bytes, 0);
    // The caller's own router config (router_KEY) is taken as it is, and
    // its argument errors name the router GEMM.
    ops::FusedMoeOptions own;
    own.router.emplace();
    own.router->block_n = 128;
    EXPECT_EQ(ops::fused_moe_router_config(a, p, own, 132, c.cc).block_n, 128);
    EXPECT_EQ(ops::fused_moe_router_config(a, p, own, 132, c.cc).k_splits, 0);
    own.router->k_splits = 65;
    TC_EXPECT_ERROR(sm90_specs(a, p, own), ErrorKind::kInvalidArgument, "fused_moe",
                    "the router GEMM (config keys router_KEY)", "k_splits", "65");
  }
}

// decode_split = -1 (the default) takes the one-kernel decode path at T = 1
// at 128 columns per slice where its (slot, slice) units fill the SMs'
// waves to 90%: on an sm_90 GPU of 132 SMs DeepSeek-V3 and Kimi-K2 (128
// units); not Mixtral (224: 85% of two waves), Qwen3-235B (96) or Qwen3-30B
// (48), nor I = 1000 (no 128-column slices); never where turned off, nor on
// sm_80. On this machine (its GPU, or 132 SMs without one) the kernel
// listing and the workspace agree with the choice.
TEST(FusedMoeCpu, DecodeSplitChoice) {
  struct Case {
    const char* model;
    int64_t E, K, H, I;
    bool split;
  };
  for (const Case& c : {Case{"deepseek-v3", 256, 8, 7168, 2048, true}, Case{"kimi-k2", 384, 8, 7168, 2048, true},
                        Case{"qwen3-235b", 128, 8, 4096, 1536, false}, Case{"mixtral", 8, 2, 4096, 14336, false},
                        Case{"qwen3-30b", 128, 8, 2048, 768, false}, Case{"I=1000", 64, 8, 4096, 1000, false}}) {
    const ops::FusedMoeArgs a = shape_only_layer(1, c.E, c.H, c.I);
    ops::FusedMoeParams p;
    p.top_k = int(c.K);
    ops::FusedMoeOptions off;
    off.decode_split = 0;
    EXPECT_EQ(ops::fused_moe_uses_decode_split(a, p, {}, 9, 132), c.split) << c.model;
    EXPECT_FALSE(ops::fused_moe_uses_decode_split(a, p, {}, 8, 132)) << c.model;
    EXPECT_FALSE(ops::fused_moe_uses_decode_split(a, p, off, 9, 132)) << c.model;
    // Here: the listing holds the split's two kernels, and the workspace its
    // fp32 partials and h slices (units x (H + 128) floats), where it runs.
    const bool here = ops::fused_moe_uses_decode_split(a, p);
    int split_kernels = 0;
    for (const jit::KernelSpec& spec : sm90_specs(a, p))
      split_kernels += spec.function.find("decode_split") != std::string::npos;
    EXPECT_EQ(split_kernels, here ? 2 : 0) << c.model;
    if (!rt::driver_available()) {
      EXPECT_EQ(here, c.split) << c.model << ": no GPU, so 9 and 132";
    }
    const size_t partials = size_t(c.K * (c.I / 128) * (c.H + 128) * 4);
    EXPECT_EQ(ops::fused_moe_workspace_bytes(a, p) >= ops::fused_moe_workspace_bytes(a, p, off) + partials, here)
        << c.model;
    // Gate and up as the views of one w13 [E, 2I, H] (experts 2IH apart):
    // the same choice (the split's copies step by the stride), unless the
    // stride breaks the copies' 16-byte alignment.
    ops::FusedMoeArgs v = a;
    const TensorView w13 = shape_only(DType::kBF16, Shape{c.E, 2 * c.I, c.H});
    std::tie(*v.w_gate.stacked, *v.w_up.stacked) = ops::gate_up_views(w13);
    EXPECT_EQ(ops::fused_moe_uses_decode_split(v, p, {}, 9, 132), c.split) << c.model << " (views of w13)";
    v.w_gate.stacked->strides[0] = v.w_up.stacked->strides[0] = 2 * c.I * c.H + 4;  // 8 bytes past aligned
    EXPECT_FALSE(ops::fused_moe_uses_decode_split(v, p, {}, 9, 132)) << c.model << " (misaligned stride)";
  }
}

// No key is ignored on the way to the one-kernel decode path: grouped-GEMM
// keys (which it could not honour) keep the choice on the grouped-GEMM decode
// kernels and are an error with decode_split=1; its own keys ask for it,
// and are an error with decode_split=0 or where it cannot run.
TEST(FusedMoeCpu, DecodeSplitKeysAreNeverIgnored) {
  auto deepseek = [](int64_t T) { return shape_only_layer(T, 256, 7168, 2048); };  // T = 1 chooses the split
  ops::FusedMoeParams p;
  p.top_k = 8;
  const ops::FusedMoeArgs a = deepseek(1);
  ASSERT_TRUE(ops::fused_moe_uses_decode_split(a, p, {}, 9, 132));
  const ops::FusedMoeOptions stages = ops::fused_moe_options({{"stages", 3}}, "--config");
  const ops::FusedMoeOptions down_gemv = ops::fused_moe_options({{"down_gemv", 1}}, "--config");
  EXPECT_FALSE(ops::fused_moe_uses_decode_split(a, p, stages, 9, 132));
  EXPECT_FALSE(ops::fused_moe_uses_decode_split(a, p, down_gemv, 9, 132));
  EXPECT_EQ(ops::moe_grouped_gemm_overrides(stages.gate_up, "gate_up_"), "gate_up_stages=3");
  EXPECT_EQ(ops::moe_grouped_gemm_overrides(ops::MoeGroupedGemmConfig{}), "");
  ops::FusedMoeOptions forced = stages;
  forced.decode_split = 1;
  TC_EXPECT_ERROR(ops::fused_moe_uses_decode_split(a, p, forced, 9, 132), ErrorKind::kInvalidArgument, "decode_split",
                  "gate_up_stages=3, down_stages=3");
  forced = down_gemv;
  forced.decode_split = 2;
  TC_EXPECT_ERROR(ops::fused_moe_uses_decode_split(a, p, forced, 9, 132), ErrorKind::kInvalidArgument, "decode_split",
                  "down_gemv=1");
  // Its own keys ask for it, so the mapped path or decode_split=0 with one
  // is an error that names it.
  ops::FusedMoeOptions cols;
  cols.decode_split_cols = 64;
  EXPECT_TRUE(ops::fused_moe_uses_decode_split(a, p, cols, 9, 132));
  TC_EXPECT_ERROR(ops::fused_moe_uses_decode_split(deepseek(4096), p, cols, 9, 132), ErrorKind::kInvalidArgument,
                  "decode_split", "mapped path (asked for by decode_split_cols)");
  ops::FusedMoeOptions pool_off;
  pool_off.decode_split = 0;
  pool_off.decode_split_pool = 2;
  TC_EXPECT_ERROR(ops::fused_moe_uses_decode_split(a, p, pool_off, 9, 132), ErrorKind::kInvalidArgument, "decode_split",
                  "decode_split=0 with decode_split_pool");
}

// On the mapped path at decode the expert projections run the gemv kernel
// where chosen (or forced); a down projection on it passes pos_to_token as
// row_token, so its 16-row tiles are one pass over their real row, not four
// over the padding.
TEST(FusedMoeCpu, DecodeLayerRunsTheGemvKernelWhereChosen) {
  const StandInLayer S(1);
  auto count = [&](ops::FusedMoeOptions o) {
    o.decode = 0;
    int gemv = 0;
    for (const jit::KernelSpec& spec : sm90_specs(S.args(), S.L.params(), o))
      gemv += spec.function == "tc::moe::grouped_gemv_kernel";
    return gemv;
  };
  // H = 64, I = 32: too little weight per output column for the default.
  EXPECT_EQ(count({}), 0);
  ops::FusedMoeOptions on;
  on.gate_up.gemv = on.down.gemv = 1;
  EXPECT_EQ(count(on), 2);
  ops::FusedMoeOptions gate_up_only;
  gate_up_only.gate_up.gemv = 1;
  EXPECT_EQ(count(gate_up_only), 1);
}

// The decode path (no mapping, combine fused into the down projection):
// taken at T = 1 and where tokens rarely share an expert ((T - 1) K <= E / 10),
// never for [K, N] weights or with a block_m override; decode = 1 where it
// cannot run is an error naming why. Its chain: router GEMM, gate, gate/up
// on the per-row schedule, down + combine.
TEST(FusedMoeCpu, DecodePathChoiceAndKernels) {
  for (int64_t T : {1, 2, 4}) {
    const StandInLayer S(T);  // E = 8, K = 2: (T - 1) * 2 * 10 <= 8 only at T = 1
    EXPECT_EQ(ops::fused_moe_uses_decode(S.args(), S.L.params()), T == 1) << T;
    ops::FusedMoeOptions on;
    on.decode = 1;
    EXPECT_TRUE(ops::fused_moe_uses_decode(S.args(), S.L.params(), on)) << T;
  }
  const StandInLayer S(1);
  // The register-load kernels by default (far under the bulk kernels' 896 KiB
  // of weights per SM), the bulk ones on request (sm_90).
  const auto reg_specs = sm90_specs(S.args(), S.L.params());
  ASSERT_EQ(reg_specs.size(), 4u);
  EXPECT_EQ(reg_specs[1].function, "tc::moe::topk_gate_kernel");
  EXPECT_EQ(reg_specs[2].function, "tc::moe::grouped_gemv_kernel");
  EXPECT_EQ(reg_specs[2].template_args[2], "1") << "per-row schedule";
  EXPECT_EQ(reg_specs[3].function, "tc::moe::grouped_gemv_combine_kernel");
  ops::FusedMoeOptions bulk;
  bulk.gate_up.bulk = 1, bulk.down.bulk = 1;
  const auto specs = sm90_specs(S.args(), S.L.params(), bulk);
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[2].function, "tc::moe::grouped_gemv_bulk_kernel") << "sm_90: bulk copies";
  EXPECT_EQ(specs[2].template_args[2], "0") << "gated mode";
  EXPECT_EQ(specs[3].function, "tc::moe::grouped_gemv_bulk_kernel");
  EXPECT_EQ(specs[3].template_args[2], "1") << "combine mode";
  // For an sm_80 target (compile --arch sm_80) the kernels an sm_80 GPU
  // runs: the register-load ones, and bulk=1 is the same error as there.
  const auto sm80 = ops::fused_moe_kernel_specs(S.args(), S.L.params(), {}, 8);
  ASSERT_EQ(sm80.size(), 4u);
  EXPECT_EQ(sm80[2].function, "tc::moe::grouped_gemv_kernel");
  EXPECT_EQ(sm80[3].function, "tc::moe::grouped_gemv_combine_kernel");
  TC_EXPECT_ERROR(ops::fused_moe_kernel_specs(S.args(), S.L.params(), bulk, 8), ErrorKind::kInvalidArgument, "'bulk'",
                  "sm_8x");
  // A projection's bad key names the projection and its config prefix.
  ops::FusedMoeOptions bad_down, bad_gate_up;
  bad_down.down.bulk = 2, bad_gate_up.gate_up.bulk = 2;
  TC_EXPECT_ERROR(sm90_specs(S.args(), S.L.params(), bad_down), ErrorKind::kInvalidArgument,
                  "fused_moe: the down projection", "down_KEY", "'bulk'", "got 2");
  TC_EXPECT_ERROR(sm90_specs(S.args(), S.L.params(), bad_gate_up), ErrorKind::kInvalidArgument,
                  "fused_moe: the gate/up projection", "gate_up_KEY", "'bulk'", "got 2");
  ops::FusedMoeOptions bm;
  bm.gate_up.block_m = 16;
  EXPECT_FALSE(ops::fused_moe_uses_decode(S.args(), S.L.params(), bm));
  bm.decode = 1;
  TC_EXPECT_ERROR(ops::fused_moe_uses_decode(S.args(), S.L.params(), bm), ErrorKind::kInvalidArgument, "fused_moe",
                  "decode", "block_m override");
  ops::FusedMoeOptions bad;
  bad.decode = 2;
  TC_EXPECT_ERROR(ops::fused_moe_uses_decode(S.args(), S.L.params(), bad), ErrorKind::kInvalidArgument, "decode", "2");
}

// Every kernel of the chain may start while the previous one drains
// (programmatic dependent launch), so each must wait for the previous grid
// before it touches memory: its spec says so and its PTX holds the wait. At
// T = 4096 (wgmma GEMMs, fused gate + mapping) and T = 1 (mma.sync GEMMs).
TEST(FusedMoeCpu, EveryChainKernelWaitsForThePreviousGrid) {
  for (int64_t T : {4096, 1}) {
    const StandInLayer S(T);
    for (const jit::KernelSpec& spec : sm90_specs(S.args(), S.L.params())) {
      SCOPED_TRACE(spec.function + " " + spec.config + " T=" + std::to_string(T));
      EXPECT_TRUE(spec.waits_for_previous_grid);
      const std::string ptx = jit::nvrtc_compile(spec, {}, "compute_90a").binary;
      EXPECT_NE(ptx.find("griddepcontrol.wait"), std::string::npos);
      EXPECT_NE(ptx.find("griddepcontrol.launch_dependents"), std::string::npos);
    }
  }
}

// The gated epilogue (silu(gate) * up) of every GEMM and GEMV kernel takes
// no IEEE division: its fast path gives way to a per-lane subroutine for
// extreme divisors, which cost the gated GEMMs 30-37% on unit-normal data,
// and even the fast path cost Qwen3-30B's gate/up 10% (H200, session 39).
// The kernels of layers that take each gated path: warp-specialised wgmma
// at T = 4096 (also CTA pairs at DeepSeek-V3's shape), mma.sync (sm90=0),
// the GEMV (Qwen3-30B T = 1), the bulk GEMV (Mixtral T = 1) and both
// decode-split kernels (DeepSeek-V3 T = 1).
TEST(FusedMoeCpu, GatedEpiloguesTakeNoIeeeDivision) {
  struct Layer {
    int64_t T, E, H, I;
    int top_k;
    std::map<std::string, int> config;
  };
  int checked = 0;
  for (const Layer& l :
       {Layer{4096, 128, 2048, 768, 8, {}}, Layer{4096, 256, 512, 256, 8, {}},
        Layer{4096, 128, 2048, 768, 8, {{"sm90", 0}}}, Layer{1, 128, 2048, 768, 8, {}}, Layer{1, 8, 4096, 14336, 2, {}},
        Layer{1, 256, 7168, 2048, 8, {}}, Layer{1, 256, 7168, 2048, 8, {{"decode_split", 2}}}}) {
    ops::FusedMoeParams p;
    p.top_k = l.top_k;
    const ops::FusedMoeOptions o = ops::fused_moe_options(l.config, "--config");
    for (const jit::KernelSpec& spec : sm90_specs(shape_only_layer(l.T, l.E, l.H, l.I), p, o)) {
      if (spec.function.find("grouped_gem") == std::string::npos &&
          spec.function.find("decode_split") == std::string::npos)
        continue;
      SCOPED_TRACE(spec.function + " " + spec.config + " T=" + std::to_string(l.T) + " E=" + std::to_string(l.E));
      const std::string ptx = jit::nvrtc_compile(spec, {}, "compute_90a").binary;
      EXPECT_EQ(ptx.find("div.rn.f32"), std::string::npos);
      ++checked;
    }
  }
  EXPECT_GE(checked, 14);
}

// Launch counters: plain launches rotate over their pairs; each launch
// recorded into a CUDA graph keeps a pair no other launch ever gets (the
// graph may replay next to any number of eager launches); running out of
// those is an error that names the op.
TEST(LaunchCounters, CapturedLaunchesOwnTheirPairs) {
  using Slots = ops::CounterPairSlots;
  Slots s;
  std::set<unsigned> captured;
  for (int i = 0; i < 10; ++i) captured.insert(s.next(true, "op"));
  EXPECT_EQ(captured.size(), 10u);
  for (unsigned i = 0; i < 3 * Slots::kEagerPairs; ++i) {
    const unsigned e = s.next(false, "op");
    ASSERT_EQ(e, i % Slots::kEagerPairs);
    ASSERT_EQ(captured.count(e), 0u);
  }
  for (unsigned i = 10; i < Slots::kCapturedPairs; ++i) {
    const unsigned c = s.next(true, "op");
    ASSERT_GE(c, Slots::kEagerPairs);
    ASSERT_LT(c, Slots::kPairs);
    captured.insert(c);
  }
  EXPECT_EQ(captured.size(), size_t(Slots::kCapturedPairs));
  TC_EXPECT_ERROR(s.next(true, "moe_grouped_gemm"), ErrorKind::kInvalidArgument, "moe_grouped_gemm", "stream",
                  "CUDA graphs", "while capturing");
  EXPECT_EQ(s.next(false, "op"), 0u);  // plain launches go on
}

// Blocks of pairs (decode_split = 2 keeps a count per slot after its pair):
// consecutive, never wrapping past the eager pairs' end (they start over at
// 0), captured blocks counted pair by pair; 0 pairs or more than a block
// may hold is an error naming the op.
TEST(LaunchCounters, BlocksAreConsecutiveAndNeverWrap) {
  using Slots = ops::CounterPairSlots;
  Slots s;
  EXPECT_EQ(s.next(false, "op", 17), 0u);
  EXPECT_EQ(s.next(false, "op"), 17u);
  for (unsigned i = 18; i < Slots::kEagerPairs - 3; ++i) s.next(false, "op");
  EXPECT_EQ(s.next(false, "op", 17), 0u) << "a block that would cross the end starts over";
  EXPECT_EQ(s.next(false, "op", 2), 17u);
  EXPECT_EQ(s.next(true, "op", 5), Slots::kEagerPairs);
  EXPECT_EQ(s.next(true, "op", 1), Slots::kEagerPairs + 5);
  TC_EXPECT_ERROR(s.next(false, "fused_moe", 0), ErrorKind::kInvalidArgument, "fused_moe", "counters", "0");
  TC_EXPECT_ERROR(s.next(true, "fused_moe", Slots::kMaxBlockPairs + 1), ErrorKind::kInvalidArgument, "fused_moe",
                  "counters", "513");
  for (unsigned left = Slots::kCapturedPairs - 6; left >= Slots::kMaxBlockPairs; left -= Slots::kMaxBlockPairs)
    s.next(true, "op", Slots::kMaxBlockPairs);
  TC_EXPECT_ERROR(s.next(true, "fused_moe", Slots::kMaxBlockPairs), ErrorKind::kInvalidArgument, "fused_moe", "stream",
                  "while capturing");
}

// Stacked weights whose experts lie apart are taken as they lie: gate and up
// as the views w13[:, :I] and w13[:, I:] of one fused [E, 2I, H] tensor, down
// as the first H rows of [E, H + 8, I] (the rows left out hold huge values),
// give the bits of contiguous copies, in the layer and in the grouped GEMM
// alone. Views the kernels cannot step through are refused, naming the
// argument: gate and up apart by different strides, experts overlapping,
// rows apart within an expert.
TEST(FusedMoeCpu, StackedWeightsMayLieApart) {
  const int64_t T = 7, H = 64, I = 32, E = 6, K = 2;
  const DType dt = DType::kBF16;
  HostTensor x(dt, {T, H}), wr(dt, {E, H}), wg(dt, {E, I, H}), wu(dt, {E, I, H}), wd(dt, {E, H, I});
  uint64_t stream = 1;
  for (HostTensor* t : {&x, &wr, &wg, &wu, &wd}) harness::fill_uniform(t->view(), 41, stream++, -0.5f, 0.5f);
  const HostTensor w13 = fuse_gate_up(wg, wu), wd_big = pad_expert_rows(wd, 8);
  const auto [gate, up] = ops::gate_up_views(w13.view());
  const TensorView down = first_rows_view(wd_big.view(), H);
  ops::FusedMoeParams p;
  p.top_k = int(K);
  p.gate.renormalize = true;
  HostTensor want(dt, {T, H}), got(dt, {T, H});
  got.fill_bytes(0xff);
  ops::fused_moe_cpu(stacked_layer_args(x.view(), wr.view(), wg.view(), wu.view(), wd.view(), want.view()), p);
  ops::fused_moe_cpu(stacked_layer_args(x.view(), wr.view(), gate, up, down, got.view()), p);
  double mass = 0;
  for (int64_t i = 0; i < T * H; ++i) mass += std::fabs(load_as_double(want.data(), dt, size_t(i)));
  EXPECT_GT(mass, 1.0) << "the reference output is (nearly) zero";
  EXPECT_EQ(std::memcmp(want.data(), got.data(), want.nbytes()), 0) << "the layer on views";

  // The grouped GEMM alone: the gated projection of every token on expert e = t % E.
  HostTensor tiles(DType::kI32, {T}), g_want(DType::kF32, {T, I}), g_got(DType::kF32, {T, I});
  for (int64_t t = 0; t < T; ++t) tiles.ptr<int32_t>()[t] = int32_t(t % E);
  ops::MoeGroupedGemmArgs g;
  g.a = x.view();
  g.tile_expert = tiles.view();
  g.w.stacked = wg.view();
  g.w_up = ops::ExpertWeights{};
  g.w_up->stacked = wu.view();
  g.out = g_want.view();
  ops::moe_grouped_gemm_cpu(g);
  g.w.stacked = gate;
  g.w_up->stacked = up;
  g.out = g_got.view();
  g_got.fill_bytes(0xff);
  ops::moe_grouped_gemm_cpu(g);
  EXPECT_EQ(std::memcmp(g_want.data(), g_got.data(), g_want.nbytes()), 0) << "the grouped GEMM on views";

  auto layer = [&](TensorView g_view, TensorView u_view) {
    ops::fused_moe_cpu(stacked_layer_args(x.view(), wr.view(), g_view, u_view, wd.view(), got.view()), p);
  };
  TC_EXPECT_ERROR(layer(gate, wu.view()), ErrorKind::kInvalidArgument, "fused_moe", "'w_up'",
                  "the expert stride of w_gate (4096 elements)", "2048 elements");
  TensorView overlap = gate;
  overlap.strides = Shape{I * H / 2, H, 1};
  TC_EXPECT_ERROR(layer(overlap, overlap), ErrorKind::kInvalidArgument, "fused_moe", "'w_gate'",
                  "first stride >= rows * cols", "strides [1024, 64, 1]");
  TensorView gaps = first_rows_view(w13.view(), I / 2);  // half the rows, one row in two
  gaps.shape = Shape{E, I, H / 2};
  gaps.strides = Shape{2 * I * H, H, 1};
  TC_EXPECT_ERROR(layer(gaps, gaps), ErrorKind::kInvalidArgument, "fused_moe", "'w_gate'", "row-major expert matrices");
  g.w.stacked = gate;
  g.w_up->stacked = wu.view();
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_cpu(g), ErrorKind::kInvalidArgument, "moe_grouped_gemm", "'w_up'",
                  "the expert stride of w (4096 elements)", "2048 elements");
}

// The CPU layer converts only the routed experts' matrices (a decode step of
// a 256-expert model reads 8 of them): unrouted experts hold NaNs here and
// must not reach the output, and the routed ones, packed, give the golden's
// bits on its full fp32 stacks, in the race's per-expert [K, N] layout and
// stacked [N, K] alike. Given routing with a dropped slot (-1).
TEST(FusedMoeCpu, OnlyRoutedExpertsAreConverted) {
  const int64_t T = 5, H = 48, I = 24, E = 8, K = 2;
  const DType dt = DType::kF16;
  const std::vector<int32_t> ids_v{6, 1, 3, 6, 1, -1, 3, 1, 6, 3};
  const std::vector<float> w_v{0.7f, 0.3f, 0.5f, 0.5f, 1.0f, 0.2f, 0.6f, 0.4f, 0.25f, 0.75f};
  const std::set<int32_t> routed{1, 3, 6};
  HostTensor x(dt, {T, H}), wr(dt, {E, H}), ids(DType::kI32, {T, K}), w(DType::kF32, {T, K});
  std::memcpy(ids.data(), ids_v.data(), ids.nbytes());
  std::memcpy(w.data(), w_v.data(), w.nbytes());
  harness::fill_uniform(x.view(), 43, 1, -1.f, 1.f);
  harness::fill_uniform(wr.view(), 43, 2, -1.f, 1.f);
  // fp32 [out, in] stacks of every expert for the golden; fp16 tensors for
  // the layer, NaN (all ones) outside the routed experts.
  const int64_t dims[3][2] = {{I, H}, {I, H}, {H, I}};
  std::vector<std::vector<float>> f32(3);
  std::vector<HostTensor> nk;
  std::vector<std::vector<HostTensor>> kn_per(3);
  for (int m = 0; m < 3; ++m) {
    const int64_t O = dims[m][0], In = dims[m][1];
    nk.emplace_back(dt, Shape{E, O, In});
    harness::fill_uniform(nk.back().view(), 43, uint64_t(10 + m), -0.5f, 0.5f);
    f32[size_t(m)].resize(size_t(E * O * In));
    for (int64_t e = 0; e < E; ++e) {
      HostTensor t(dt, {In, O});
      for (int64_t o = 0; o < O; ++o)
        for (int64_t i = 0; i < In; ++i) {
          const size_t src = size_t((e * O + o) * In + i);
          f32[size_t(m)][src] = float(load_as_double(nk.back().data(), dt, src));
          static_cast<uint16_t*>(t.data())[i * O + o] = static_cast<const uint16_t*>(nk.back().data())[src];
        }
      if (!routed.count(int32_t(e))) {
        t.fill_bytes(0xff);
        std::memset(static_cast<char*>(nk.back().data()) + size_t(e * O * In) * 2, 0xff, size_t(O * In) * 2);
      }
      kn_per[size_t(m)].push_back(std::move(t));
    }
  }
  HostTensor want(dt, {T, H}), got(dt, {T, H});
  std::vector<float> golden(size_t(T * H));
  std::vector<float> xf(size_t(T * H));
  for (int64_t i = 0; i < T * H; ++i) xf[size_t(i)] = float(load_as_double(x.data(), dt, size_t(i)));
  std::vector<int32_t> ids_in = ids_v;
  std::vector<float> w_in = w_v;
  reference::FusedMoeRef r{xf.data(),    nullptr,     f32[0].data(), f32[1].data(), f32[2].data(), nullptr,
                           golden.data(), ids_in.data(), w_in.data(), T, H, I, E, K};
  r.act = dt;
  r.given_routing = true;
  reference::fused_moe(r);
  double mass = 0;
  for (int64_t i = 0; i < T * H; ++i) {
    store_row_f32(want.data(), dt, size_t(i), 1, &golden[size_t(i)]);
    mass += std::fabs(golden[size_t(i)]);
  }
  ASSERT_GT(mass, 1.0) << "the golden output is (nearly) zero";
  ops::FusedMoeParams p;
  p.top_k = int(K);
  p.given_routing = true;
  for (const bool per_expert_kn : {true, false}) {
    ops::FusedMoeArgs a = stacked_layer_args(x.view(), wr.view(), nk[0].view(), nk[1].view(), nk[2].view(), got.view());
    if (per_expert_kn) {
      ops::ExpertWeights* ws[3] = {&a.w_gate, &a.w_up, &a.w_down};
      for (int m = 0; m < 3; ++m) {
        ws[m]->stacked.reset();
        ws[m]->layout = ops::WeightLayout::kKN;
        for (const HostTensor& t : kn_per[size_t(m)]) ws[m]->per_expert.push_back(t.view());
      }
    }
    a.ids = ids.view();
    a.weights = w.view();
    got.fill_bytes(0xff);
    ops::fused_moe_cpu(a, p);
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.nbytes()), 0)
        << (per_expert_kn ? "per-expert [K, N] weights" : "stacked [N, K] weights");
  }
}
