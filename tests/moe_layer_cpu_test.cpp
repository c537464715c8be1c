// The grouped GEMM and the fused MoE layer without a GPU: every smoke case of
// both ops on the CPU backend (golden + float64 check), the argument checks
// (each error names op, argument, expectation and what was given), and the
// kernels the layer compiles for sm_90a.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "ops/moe/decode_split.h"
#include "ops/moe/launch_counters.h"
#include "tilecraft/harness/random.h"
#include "test_util.h"
#include "tilecraft/jit/compiler.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/ops/fused_moe.h"
#include "tilecraft/ops/moe_fused_mapping.h"
#include "tilecraft/ops/moe_grouped_gemm.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

using namespace tilecraft;

TEST(MoeGroupedGemmCpu, SmokeCases) {
  EXPECT_GT(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCPU), 40);
}

TEST(FusedMoeCpu, SmokeCases) { EXPECT_GT(test::expect_manifest_cases_pass("fused_moe", DeviceType::kCPU), 8); }

TEST(MoeGroupedGemmCpu, TileHeightHeuristic) {
  EXPECT_EQ(ops::moe_grouped_gemm_block_m(0.5), 16);
  EXPECT_EQ(ops::moe_grouped_gemm_block_m(16), 32);
  EXPECT_EQ(ops::moe_grouped_gemm_block_m(64), 64);
  EXPECT_EQ(ops::moe_grouped_gemm_block_m(1000), 128);
  // With the warp-specialised kernel: 64-row tiles from 9 rows until experts spill past 64.
  EXPECT_EQ(ops::moe_grouped_gemm_block_m(8, true), 16);
  EXPECT_EQ(ops::moe_grouped_gemm_block_m(8.5, true), 64);
  EXPECT_EQ(ops::moe_grouped_gemm_block_m(48, true), 64);
  EXPECT_EQ(ops::moe_grouped_gemm_block_m(50, true), 128);  // 50 + 2 * sqrt(50) > 64: experts spill a 64-row tile
  EXPECT_EQ(ops::moe_grouped_gemm_block_m(64, true), 128);
  EXPECT_EQ(ops::moe_grouped_gemm_block_m(65, true), 128);
}

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
    ops::FusedMoeArgs a;
    a.x = x.view();
    a.w_router = wr.view();
    a.w_gate.stacked = wg.view();
    a.w_up.stacked = wu.view();
    a.w_down.stacked = wd.view();
    a.out = out.view();
    return a;
  }
  ops::FusedMoeParams params() const {
    ops::FusedMoeParams p;
    p.top_k = int(K);
    return p;
  }
};
}  // namespace

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
    TC_EXPECT_ERROR(ops::validate_fused_moe(a, L.params(), DeviceType::kCPU), ErrorKind::kInvalidArgument,
                    "w_gate", "[32, 64]", "[32, 65]");
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
    TC_EXPECT_ERROR(ops::fused_moe_options({{"gate_tokens_per_block", 33}}, "--config"),
                    ErrorKind::kInvalidArgument, "--config", "gate_tokens_per_block", "1..32", "33");
    TC_EXPECT_ERROR(ops::fused_moe_options({{"mapping_blocks", -1}}, "--config"), ErrorKind::kInvalidArgument,
                    "mapping_blocks 0 (choose)", "-1");
    // (the mapping op's own limit, so a listing or compile refuses it, not only a run)
    EXPECT_EQ(ops::fused_moe_options({{"mapping_blocks", 1024}}, "--config").mapping_blocks, 1024);
    TC_EXPECT_ERROR(ops::fused_moe_options({{"mapping_blocks", 1025}}, "--config"), ErrorKind::kInvalidArgument,
                    "up to 1024 blocks", "1025");
    EXPECT_EQ(ops::fused_moe_options({{"router_split", 0}}, "--config").router_split, 0);
    EXPECT_EQ(ops::fused_moe_options({{"fused_combine", 1}}, "--config").fused_combine, 1);
    EXPECT_EQ(ops::fused_moe_options({}, "--config").fused_combine, -1);
    TC_EXPECT_ERROR(ops::fused_moe_options({{"fused_combine", 2}}, "--config"), ErrorKind::kInvalidArgument,
                    "--config", "fused_combine 0", "1 (fused into it)", "2");
    // router_KEY: the router GEMM's own overrides; plain keys do not reach it.
    const ops::FusedMoeOptions r = ops::fused_moe_options({{"router_block_n", 64}, {"router_k_splits", 8}}, "--config");
    ASSERT_TRUE(r.router.has_value());
    EXPECT_EQ(r.router->block_n, 64);
    EXPECT_EQ(r.router->k_splits, 8);
    EXPECT_FALSE(ops::fused_moe_options({{"block_n", 64}}, "--config").router.has_value());
    TC_EXPECT_ERROR(ops::fused_moe_options({{"router_blocks_n", 64}}, "--config"), ErrorKind::kInvalidArgument,
                    "blocks_n");
    TC_EXPECT_ERROR(ops::fused_moe_options({{"router_split", 1}}, "--config"), ErrorKind::kInvalidArgument,
                    "--config", "router_split 0", "-1 (choose", "1");
    // An unknown key: the error lists the layer's keys and the grouped GEMM's.
    TC_EXPECT_ERROR(ops::fused_moe_options({{"decode_splt", 1}}, "--config"), ErrorKind::kInvalidArgument,
                    "'decode_splt'", "decode_split_pool", "block_m", "gate_up_");
  }
}

namespace {
// A device view at an aligned address that is never dereferenced: for the
// host's choices (configs, kernel specs, listings), which read shapes and
// alignment only.
TensorView shape_only(DType t, Shape shape) {
  return TensorView(reinterpret_cast<void*>(uintptr_t(1) << 20), t, shape, Device{DeviceType::kCUDA, 0});
}

// A bf16 layer of T tokens, E experts, hidden size H and intermediate I,
// stacked [N, K] weights, as shape-only views.
ops::FusedMoeArgs shape_only_layer(int64_t T, int64_t E, int64_t H, int64_t I) {
  auto view = [](std::initializer_list<int64_t> shape) { return shape_only(DType::kBF16, Shape(shape)); };
  ops::FusedMoeArgs a;
  a.x = view({T, H});
  a.out = view({T, H});
  a.w_router = view({E, H});
  a.w_gate.stacked = view({E, I, H});
  a.w_up.stacked = view({E, I, H});
  a.w_down.stacked = view({E, H, I});
  return a;
}

// Grouped GEMM arguments as the layer builds them: A rows gathered through
// idx, stacked weights (also the up half when gated), one expert per tile.
ops::MoeGroupedGemmArgs gathered_args(TensorView a, TensorView w, TensorView out, TensorView tiles, TensorView idx,
                                      bool gated = false) {
  ops::MoeGroupedGemmArgs g;
  g.a = a;
  g.w.stacked = w;
  if (gated) g.w_up = ops::ExpertWeights{w, {}, ops::WeightLayout::kNK};
  g.out = out;
  g.tile_expert = tiles;
  g.a_index = idx;
  return g;
}

// ptxas keeps a kernel's wgmma groups asynchronous: no "wgmma.mma_async
// instructions are serialized" (C7520, an info line of the compile log),
// which a branch between a group's fence and its commit causes (session 28:
// a ping-pong kernel with a branch per 64-row half ran 2x slower). The log
// holds ptxas's resource line, so it is the real log, also on a cache hit.
void expect_wgmma_pipelined(const jit::CompiledKernel& k) {
  EXPECT_NE(k.log.find(" registers"), std::string::npos) << "no ptxas log";
  EXPECT_EQ(k.log.find("C7520"), std::string::npos) << k.log;
}

// A warp-specialised kernel compiled for sm_90a at the register split its
// setmaxnreg assumes (168 at launch), without spills or a stack, its wgmma
// groups pipelined.
void expect_ws_kernel_clean(const jit::KernelSpec& spec) {
  const auto k = jit::compile(spec, {}, "sm_90a");
  EXPECT_EQ(k->resources.spill_store_bytes, 0);
  EXPECT_EQ(k->resources.stack_frame_bytes, 0);
  EXPECT_EQ(k->resources.registers, 168);
  expect_wgmma_pipelined(*k);
}
}  // namespace

TEST(MoeGroupedGemmCpu, ArgumentErrorsNameTheArgument) {
  HostTensor a(DType::kBF16, {10, 64}), w(DType::kBF16, {2, 48, 64}), out(DType::kBF16, {64, 48});
  HostTensor tiles(DType::kI32, {4}), tiles_bad(DType::kI32, {3}), idx(DType::kI32, {64});
  ops::MoeGroupedGemmArgs g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view());
  EXPECT_NO_THROW(ops::validate_moe_grouped_gemm(g, DeviceType::kCPU));
  auto bad = g;
  bad.tile_expert = tiles_bad.view();
  TC_EXPECT_ERROR(ops::validate_moe_grouped_gemm(bad, DeviceType::kCPU), ErrorKind::kInvalidArgument,
                  "moe_grouped_gemm", "tile_expert", "M = 64");
  bad = g;
  bad.tile_expert.reset();
  TC_EXPECT_ERROR(ops::validate_moe_grouped_gemm(bad, DeviceType::kCPU), ErrorKind::kInvalidArgument, "tile_expert",
                  "2 experts");
  bad = g;
  bad.w.layout = ops::WeightLayout::kKN;
  TC_EXPECT_ERROR(ops::validate_moe_grouped_gemm(bad, DeviceType::kCPU), ErrorKind::kInvalidArgument, "'w'",
                  "KN layout");
  // 16-row tiles: the wgmma kernel cannot take them; asking says why.
  ops::MoeGroupedGemmConfig over;
  over.sm90 = 1;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "sm90", "block_m 16");
  // The block_m override must match the schedule.
  over = {};
  over.block_m = 32;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "block_m", "16");
  // The decode kernels' launch keys: the preload and the carveout only where
  // they apply, each error naming what was asked.
  over = {};
  over.carveout = 2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "carveout", "2");
  over = {};
  over.gemv = 0, over.carveout = 1;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "carveout", "MMA kernels");
  over.carveout = -1, over.preload = 1;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "preload", "MMA kernels");
  over = {};
  over.gemv = 1, over.preload = 1;  // no combine: not the decode combine kernel
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "preload", "settled");
  over.preload = -1, over.carveout = 1;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).carveout, 1);
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 8), ErrorKind::kInvalidArgument, "carveout", "sm_8x");
}

// The warp-specialised wgmma kernel (sm90=2): one producer and two consumer
// warpgroups, a full and an empty mbarrier per stage; only where wgmma fits.
TEST(MoeGroupedGemmCpu, WarpSpecialisedConfig) {
  HostTensor a(DType::kBF16, {1024, 256}), w(DType::kBF16, {2, 512, 256}), out(DType::kBF16, {1024, 512});
  HostTensor tiles(DType::kI32, {8}), idx(DType::kI32, {1024});
  ops::MoeGroupedGemmArgs g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view());
  ops::MoeGroupedGemmConfig over;
  over.sm90 = 2;
  const auto c = ops::moe_grouped_gemm_config(g, over, 9);
  EXPECT_EQ(c.sm90, 2);
  EXPECT_EQ(c.block_m, 128);
  EXPECT_EQ(32 * c.warps_m * c.warps_n, 384);
  EXPECT_NE(c.str().find("wgmma-ws"), std::string::npos) << c.str();
  const auto spec = ops::moe_grouped_gemm_kernel_spec(g, c);
  EXPECT_EQ(spec.header, "moe/grouped_gemm_sm90_ws.cuh");
  over.sm90 = 3;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "sm90", "warp-specialised");
  over.sm90 = 2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 8), ErrorKind::kInvalidArgument, "sm90", "sm_8x");
  // Weights by TMA by default (stacked), by cp.async on request; TMA is
  // refused for the other kernels and for pointer tables over 64 experts.
  EXPECT_EQ(c.tma, 1);
  // The dynamic tile counter by default; 0 asks for one CTA per tile.
  EXPECT_EQ(c.persistent, 2);
  EXPECT_NE(c.str().find("persistent-dynamic"), std::string::npos) << c.str();
  {
    ops::MoeGroupedGemmConfig o = over;
    o.persistent = 0;
    const auto c0 = ops::moe_grouped_gemm_config(g, o, 9);
    EXPECT_EQ(c0.persistent, 0);
    EXPECT_EQ(c0.str().find("persistent"), std::string::npos) << c0.str();
  }
  {
    ops::MoeGroupedGemmConfig o = over;
    o.persistent = 1;
    const auto cp = ops::moe_grouped_gemm_config(g, o, 9);
    EXPECT_EQ(cp.persistent, 1);
    EXPECT_NE(cp.str().find("persistent"), std::string::npos) << cp.str();
    o.persistent = 1, o.sm90 = 1;
    TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, o, 9), ErrorKind::kInvalidArgument, "persistent", "sm90=1");
    o.persistent = 2, o.sm90 = 2;
    EXPECT_NE(ops::moe_grouped_gemm_config(g, o, 9).str().find("persistent-dynamic"), std::string::npos);
    o.persistent = 3;
    TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, o, 9), ErrorKind::kInvalidArgument, "persistent", "3");
  }
  EXPECT_NE(c.str().find("tma-weights"), std::string::npos) << c.str();
  // Tiles stored by TMA by default (rows of 1024 bytes), by the consumers on
  // request; refused without TMA weights and for rows off 16 bytes.
  EXPECT_EQ(c.tma_store, 1);
  EXPECT_NE(c.str().find("tma-store"), std::string::npos) << c.str();
  {
    ops::MoeGroupedGemmConfig o = over;
    o.tma_store = 0;
    EXPECT_EQ(ops::moe_grouped_gemm_config(g, o, 9).tma_store, 0);
    o.tma_store = 2;
    TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, o, 9), ErrorKind::kInvalidArgument, "tma_store", "2");
    o.tma_store = 1, o.tma = 0;
    TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, o, 9), ErrorKind::kInvalidArgument, "tma_store", "tma=0");
    o.tma = -1, o.sm90 = 1;
    TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, o, 9), ErrorKind::kInvalidArgument, "tma_store", "sm90=1");
    HostTensor odd(DType::kBF16, {1024, 202}), w202(DType::kBF16, {2, 202, 256});
    auto g202 = gathered_args(a.view(), w202.view(), odd.view(), tiles.view(), idx.view());
    o.sm90 = 2, o.tma_store = -1;
    EXPECT_EQ(ops::moe_grouped_gemm_config(g202, o, 9).tma_store, 0);
    o.tma_store = 1;
    TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g202, o, 9), ErrorKind::kInvalidArgument, "tma_store",
                    "rows of 404 bytes");
  }
  // The kernel's template arguments: ..., TMA, TMA_A, TMA_C, CLUSTER,
  // STAGGER, LEAN_A, LEAN_DESC (the last three only off their defaults).
  ASSERT_EQ(spec.template_args.size(), 15u);
  EXPECT_EQ(spec.template_args[8], "true");    // TMA weights
  EXPECT_EQ(spec.template_args[9], "false");   // A gathered through a_index: cp.async
  EXPECT_EQ(spec.template_args[10], "true");   // TMA_C
  EXPECT_EQ(spec.template_args[11], "1");      // CLUSTER: one CTA per tile
  EXPECT_EQ(spec.template_args[12], "0");      // STAGGER
  EXPECT_EQ(spec.template_args[13], "true");   // LEAN_A, chosen
  EXPECT_EQ(spec.template_args[14], "true");   // LEAN_DESC, chosen
  over.tma = 0;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).tma, 0);
  over.tma = -1;
  over.sm90 = 0;  // the other kernels never take the TMA launch
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).tma, 0);
  over.sm90 = 1;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).tma, 0);
  over.sm90 = -1;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).tma, 1);
  over.sm90 = 2;
  over.tma = 1;
  over.sm90 = 1;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "tma", "sm90=1");
  over.sm90 = 2;
  over.tma = 3;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "tma", "3");
  over.tma = 2;  // A by TMA needs A rows in layout order
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "tma", "a_index");
  g.a_index.reset();
  over.tma = -1;
  const auto ca = ops::moe_grouped_gemm_config(g, over, 9);
  EXPECT_EQ(ca.tma, 2);
  EXPECT_NE(ca.str().find("tma-a+weights"), std::string::npos) << ca.str();
  const auto spec_a = ops::moe_grouped_gemm_kernel_spec(g, ca);
  ASSERT_EQ(spec_a.template_args.size(), 15u);
  EXPECT_EQ(spec_a.template_args[9], "true");    // TMA_A
  EXPECT_EQ(spec_a.template_args[13], "false");  // LEAN_A: A comes by TMA
  EXPECT_EQ(spec_a.template_args[14], "true");   // LEAN_DESC
  g.a_index = idx.view();
  std::vector<HostTensor> many;
  g.w.stacked.reset();
  for (int e = 0; e < 65; ++e) many.emplace_back(DType::kBF16, Shape{512, 256});
  for (auto& t : many) g.w.per_expert.push_back(t.view());
  over.tma = -1;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).tma, 0);
  over.tma = 1;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "tma", "65 expert tensors");
}

// The warp-specialised kernel with its staged epilogue (32 KB of shared
// memory next to the ring): the default stage counts still fit 227 KB, and
// every tile shape and output type compiles for sm_90a without spills.
TEST(MoeGroupedGemmCpu, WarpSpecialisedKernelsCompileWithoutSpills) {
  HostTensor a(DType::kBF16, {1024, 256}), w(DType::kBF16, {2, 512, 256}), idx(DType::kI32, {1024});
  for (DType out_t : {DType::kBF16, DType::kF32}) {
    HostTensor out(out_t, {1024, 512});
    for (bool gated : {false, true})
      for (int block_m : {128, 64})
        for (int store : {1, 0}) {
        HostTensor tiles(DType::kI32, {1024 / block_m});  // the schedule's height is the tile's
        ops::MoeGroupedGemmArgs g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view(), gated);
        ops::MoeGroupedGemmConfig over;
        over.sm90 = 2, over.block_m = block_m, over.tma_store = store;
        const auto c = ops::moe_grouped_gemm_config(g, over, 9);
        SCOPED_TRACE(c.str() + (gated ? " gated " : " plain ") + dtype_name(out_t));
        EXPECT_EQ(c.tma_store, store);
        EXPECT_GE(c.stages, 3);
        // (384 threads x 168 at launch: what setmaxnreg's split, producer 56
        // and consumers 224, is balanced against)
        expect_ws_kernel_clean(ops::moe_grouped_gemm_kernel_spec(g, c));
      }
  }
}

// CTA pairs (cluster=2): only for the warp-specialised kernel with TMA
// weights; every form of it (gated or plain, 64- or 128-row tiles, A
// gathered or by TMA, [K, N] weights, stores by TMA or not) compiles for
// sm_90a without spills, at the register split the kernel's setmaxnreg
// assumes.
TEST(MoeGroupedGemmCpu, CtaPairKernelsCompileWithoutSpills) {
  HostTensor a(DType::kBF16, {1024, 256}), w(DType::kBF16, {2, 512, 256}), wkn(DType::kBF16, {2, 256, 512}),
      idx(DType::kI32, {1024}), out(DType::kBF16, {1024, 512});
  struct Form {
    bool gated, gathered, kn;
    int block_m, store;
  };
  for (const Form f : {Form{true, true, false, 128, 1}, Form{false, false, false, 128, 1},
                       Form{false, true, true, 128, 0}, Form{true, true, false, 64, 1}, Form{false, false, true, 64, 1}}) {
    HostTensor tiles(DType::kI32, {1024 / f.block_m});
    ops::MoeGroupedGemmArgs g =
        gathered_args(a.view(), (f.kn ? wkn : w).view(), out.view(), tiles.view(), idx.view(), f.gated);
    if (f.kn) g.w.layout = ops::WeightLayout::kKN;
    if (f.kn && f.gated) g.w_up->layout = ops::WeightLayout::kKN;
    if (!f.gathered) g.a_index.reset();
    ops::MoeGroupedGemmConfig over;
    over.block_m = f.block_m, over.tma_store = f.store, over.cluster = 2;
    const auto c = ops::moe_grouped_gemm_config(g, over, 9);
    SCOPED_TRACE(c.str());
    EXPECT_EQ(c.sm90, 2);
    EXPECT_EQ(c.cluster, 2);
    EXPECT_NE(c.str().find("cta-pairs"), std::string::npos);
    const auto spec = ops::moe_grouped_gemm_kernel_spec(g, c);
    EXPECT_EQ(spec.template_args.at(11), "2");  // CLUSTER
    expect_ws_kernel_clean(spec);
  }
}

// lean_a=1 (the producer's gathered A rows as addresses made once per
// tile) and lean_desc=1 (the consumers' descriptors by adds) on the forms
// that gather A: gated and plain, [N, K] and [K, N], weights by TMA and by
// cp.async, 64- and 128-row tiles, pairs, with a stagger: compiles for
// sm_90a without spills at the kernel's register split, its wgmma groups
// not serialised, named as such; errors where A comes by TMA (lean_a) or
// off the warp-specialised kernel.
TEST(MoeGroupedGemmCpu, LeanAKernelsCompileWithoutSpills) {
  HostTensor a(DType::kBF16, {1024, 256}), w(DType::kBF16, {2, 512, 256}), wkn(DType::kBF16, {2, 256, 512}),
      idx(DType::kI32, {1024}), out(DType::kBF16, {1024, 512});
  struct Form {
    bool gated, kn;
    int block_m, tma, cluster, stagger, lean_a, lean_desc;
  };
  for (const Form f : {Form{true, false, 128, 1, 1, 0, 1, 0}, Form{false, true, 128, 1, 1, 0, 1, 0},
                       Form{true, true, 64, 0, 1, 0, 1, 0}, Form{false, false, 128, 1, 2, 0, 1, 0},
                       Form{true, false, 128, 1, 1, 2, 1, 0}, Form{true, false, 128, 1, 1, 0, 0, 1},
                       Form{false, true, 128, 1, 1, 0, 1, 1}, Form{true, true, 64, 1, 2, 0, 1, 1},
                       Form{false, false, 64, 1, 1, 0, 0, 1}}) {
    HostTensor tiles(DType::kI32, {1024 / f.block_m});
    ops::MoeGroupedGemmArgs g =
        gathered_args(a.view(), (f.kn ? wkn : w).view(), out.view(), tiles.view(), idx.view(), f.gated);
    if (f.kn) g.w.layout = ops::WeightLayout::kKN;
    if (f.kn && f.gated) g.w_up->layout = ops::WeightLayout::kKN;
    ops::MoeGroupedGemmConfig over;
    over.sm90 = 2, over.block_m = f.block_m, over.tma = f.tma, over.cluster = f.cluster, over.stagger = f.stagger;
    over.lean_a = f.lean_a, over.lean_desc = f.lean_desc;
    const auto c = ops::moe_grouped_gemm_config(g, over, 9);
    SCOPED_TRACE(c.str());
    EXPECT_EQ(c.str().find("lean-a") != std::string::npos, f.lean_a == 1);
    EXPECT_EQ(c.str().find("lean-desc") != std::string::npos, f.lean_desc == 1);
    const auto spec = ops::moe_grouped_gemm_kernel_spec(g, c);
    EXPECT_EQ(spec.template_args.back(), "true");
    expect_ws_kernel_clean(spec);
  }
  HostTensor tiles(DType::kI32, {8});
  ops::MoeGroupedGemmArgs g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view());
  ops::MoeGroupedGemmConfig over;
  over.lean_a = 2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "lean_a", "2");
  over.lean_a = 1, over.sm90 = 1;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "lean_a", "warpgroups=2");
  g.a_index.reset();  // rows in layout order: A by TMA (tma=2)
  over.sm90 = 2, over.tma = 2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "lean_a", "tma-a+weights");
  over.lean_a = 0, over.lean_desc = 1;  // A by TMA: the consumers' descriptors still apply
  const std::string by_tma = ops::moe_grouped_gemm_config(g, over, 9).str();
  EXPECT_NE(by_tma.find("tma-a+weights"), std::string::npos) << by_tma;
  EXPECT_NE(by_tma.find("lean-desc"), std::string::npos) << by_tma;
  over.lean_desc = 2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "lean_desc", "2");
  over.lean_desc = 1, over.sm90 = 1, over.tma = -1;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "lean_desc",
                  "warpgroups=2");
}

// A gated projection of 8 experts over 1024 gathered rows (8 row tiles of
// 128), for the config tests of the warp-specialised kernel's options.
struct EightExpertGatedGemm {
  HostTensor a{DType::kBF16, {1024, 256}}, w{DType::kBF16, {8, 512, 256}}, idx{DType::kI32, {1024}},
      out{DType::kBF16, {1024, 512}}, tiles{DType::kI32, {8}};
  ops::MoeGroupedGemmArgs g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view(), true);
  // The warp-specialised kernel on 128-row tiles, every other key chosen.
  static ops::MoeGroupedGemmConfig ws128() {
    ops::MoeGroupedGemmConfig c;
    c.sm90 = 2, c.block_m = 128;
    return c;
  }
};

// fill_stores (padding rows not stored): chosen with tile_fill given on the
// warp-specialised kernel's tensor stores up to 1 row tile per expert;
// off without tile_fill, past one tile, with the consumers' stores; refused
// where it cannot run, naming what was chosen; its kernels (gated and plain,
// A gathered and by TMA, 64- and 128-row tiles, pairs) compile for sm_90a
// without spills, the key as the last template argument.
TEST(MoeGroupedGemmCpu, FillStoresConfig) {
  EightExpertGatedGemm e;
  HostTensor &a = e.a, &w = e.w, &idx = e.idx, &out = e.out;
  ops::MoeGroupedGemmArgs& g = e.g;
  ops::MoeGroupedGemmConfig over = e.ws128();
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).fill_stores, 0) << "no tile_fill";
  over.fill_stores = 1;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "moe_grouped_gemm",
                  "fill_stores", "tile_fill given");
  g.tile_fill = idx.view();
  over.fill_stores = -1;
  g.rows_used = 128 * 8;  // one row tile per expert on average
  const auto on = ops::moe_grouped_gemm_config(g, over, 9);
  EXPECT_EQ(on.fill_stores, 1);
  EXPECT_NE(on.str().find("fill-stores"), std::string::npos) << on.str();
  g.rows_used = 128 * 8 + 1;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).fill_stores, 0) << "past one row tile per expert";
  over.fill_stores = 1;  // given: any rows per expert
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).fill_stores, 1);
  over.tma_store = 0;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "fill_stores", "tma_store=1",
                  "wgmma-ws");
  over.tma_store = -1, over.sm90 = 0;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "fill_stores", "mma bm=");
  over.sm90 = 2, over.fill_stores = 2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "fill_stores", "2");
  struct Form {
    bool gated, gathered;
    int block_m, cluster;
  };
  for (const Form f : {Form{true, true, 128, 1}, Form{true, true, 64, 1}, Form{false, false, 128, 1},
                       Form{false, false, 64, 1}, Form{true, true, 128, 2}, Form{false, false, 64, 2}}) {
    HostTensor t(DType::kI32, {1024 / f.block_m});
    ops::MoeGroupedGemmArgs h = gathered_args(a.view(), w.view(), out.view(), t.view(), idx.view(), f.gated);
    if (!f.gathered) h.a_index.reset();
    h.tile_fill = idx.view();
    ops::MoeGroupedGemmConfig o;
    o.sm90 = 2, o.block_m = f.block_m, o.cluster = f.cluster, o.fill_stores = 1;
    const auto c = ops::moe_grouped_gemm_config(h, o, 9);
    SCOPED_TRACE(c.str());
    const auto spec = ops::moe_grouped_gemm_kernel_spec(h, c);
    ASSERT_EQ(spec.template_args.size(), 16u);
    EXPECT_EQ(spec.template_args.back(), "true");  // FILL
    expect_ws_kernel_clean(spec);
  }
}

// Expert-aligned groups (group_align): off unless given; given, only where
// there are groups to align (group_m >= 2), experts to align them to (a tile
// schedule) and room below group_m; a launch parameter (the same kernel).
TEST(MoeGroupedGemmCpu, GroupAlignConfig) {
  EightExpertGatedGemm e;
  ops::MoeGroupedGemmArgs& g = e.g;
  ops::MoeGroupedGemmConfig over = e.ws128();
  const auto plain = ops::moe_grouped_gemm_config(g, over, 9);
  EXPECT_EQ(plain.group_align, 0);
  ops::set_config_key(over, "group_align", 3, "moe_grouped_gemm", "--config");
  const auto aligned = ops::moe_grouped_gemm_config(g, over, 9);
  EXPECT_EQ(aligned.group_align, 3);
  EXPECT_EQ(aligned.group_m, 8);
  EXPECT_EQ(ops::moe_grouped_gemm_kernel_spec(g, aligned).template_args,
            ops::moe_grouped_gemm_kernel_spec(g, plain).template_args);
  over.group_m = 3;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "moe_grouped_gemm",
                  "group_align", "group_align=3 with group_m=3");
  over.group_m = 1, over.group_align = 1;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "group_align", "group_m >= 2",
                  "group_m=1");
  over.group_m = 4, over.sm90 = 0;  // the mma.sync kernel: fixed groups only
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "group_align", "mma bm=");
  over.sm90 = 2, over.tma = 0;  // the warp-specialised kernel without TMA weights
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "group_align", "wgmma-ws");
  over.tma = -1;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).group_align, 1);
  g.tile_expert.reset();
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "group_align",
                  "no tile_expert");
  over.group_align = -2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "group_align", "-2");
  over.group_align = 4, over.group_m = 8;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "group_align",
                  "1..min(3, group_m - 1)");
}

// Chosen where one expert's weights take 16 MiB or more (DeepSeek-V3's
// projections, not Qwen3-30B's), on the warp-specialised kernel with the
// dynamic scheduler, in groups (not one row tile at a time).
TEST(MoeGroupedGemmCpu, GroupAlignChosenForLargeExperts) {
  auto view = [](DType t, std::initializer_list<int64_t> shape) { return shape_only(t, Shape(shape)); };
  struct Case {
    int64_t E, N, K;
    bool gated;
    int64_t rows, block_m;
    int want;
  };
  for (const Case c : {Case{256, 2048, 7168, true, 32768, 128, 3},   // DeepSeek-V3 T=4096 gate/up (pairs, groups of 8)
                       Case{256, 7168, 2048, false, 32768, 128, 3},  // its down projection
                       Case{128, 2048, 768, false, 32768, 128, 0},   // Qwen3-30B's down: 3 MB per expert
                       Case{128, 768, 2048, true, 32768, 128, 0},    // its gate/up: one row tile at a time
                       Case{256, 7168, 2048, false, 4096, 64, 0},    // DeepSeek-V3 T=512: one row tile at a time
                       Case{8, 4096, 4096, false, 8192, 128, 3}}) {  // 32 MB per expert, few experts
    const int64_t M = 2 * c.rows + 128 * c.E;
    ops::MoeGroupedGemmArgs g;
    g.a = view(DType::kBF16, {M, c.K});
    g.w.stacked = view(DType::kBF16, {c.E, c.N, c.K});
    if (c.gated) g.w_up = ops::ExpertWeights{view(DType::kBF16, {c.E, c.N, c.K}), {}, ops::WeightLayout::kNK};
    g.out = view(DType::kBF16, {M, c.N});
    g.tile_expert = view(DType::kI32, {M / c.block_m});
    g.a_index = view(DType::kI32, {M});
    g.rows_used = c.rows;
    const auto cfg = ops::moe_grouped_gemm_config(g, {}, 9, 132);
    SCOPED_TRACE(cfg.str());
    EXPECT_EQ(cfg.group_align, c.want) << "E=" << c.E << " N=" << c.N << " K=" << c.K << " group_m=" << cfg.group_m;
    ops::MoeGroupedGemmConfig over;
    over.persistent = 1;  // the static walk decodes the order on the consumers' way: not chosen
    EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9, 132).group_align, 0);
  }
}

TEST(MoeGroupedGemmCpu, StaggerConfig) {
  HostTensor a(DType::kBF16, {1024, 256}), w(DType::kBF16, {2, 512, 256}), idx(DType::kI32, {1024}),
      out(DType::kBF16, {1024, 512}), tiles(DType::kI32, {8});
  ops::MoeGroupedGemmArgs g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view());
  ops::MoeGroupedGemmConfig over;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).stagger, 0);  // in step by default
  ops::set_config_key(over, "stagger", 2, "moe_grouped_gemm", "--config");
  const ops::MoeGroupedGemmConfig c = ops::moe_grouped_gemm_config(g, over, 9);
  EXPECT_EQ(c.stagger, 2);
  EXPECT_NE(c.str().find("stagger=2"), std::string::npos) << c.str();
  over.stagger = 4;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "stagger", "4");
  over.stagger = 3, over.stages = 3;  // the lag must stay inside the ring
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "stagger", "stages=3");
  over.stages = 0, over.cluster = 2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "stagger", "cta-pairs");
  over.cluster = -1, over.sm90 = 1;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "stagger", "warpgroups=2");
  over.sm90 = 0;  // the mma.sync kernel
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "stagger", "mma bm=");
}

TEST(MoeGroupedGemmCpu, CtaPairConfig) {
  HostTensor a(DType::kBF16, {1024, 256}), w(DType::kBF16, {2, 512, 256}), idx(DType::kI32, {1024}),
      out(DType::kBF16, {1024, 512}), tiles(DType::kI32, {8});
  ops::MoeGroupedGemmArgs g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view());
  ops::MoeGroupedGemmConfig over;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).cluster, 1);  // 2 experts: no pairs
  ops::set_config_key(over, "cluster", 2, "moe_grouped_gemm", "--config");
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).cluster, 2);
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).multicast, 0);  // chosen: pairs load their own boxes
  EXPECT_NE(ops::moe_grouped_gemm_config(g, over, 9).str().find("cta-pairs"), std::string::npos);
  ops::set_config_key(over, "multicast", 1, "moe_grouped_gemm", "--config");
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).multicast, 1);
  EXPECT_NE(ops::moe_grouped_gemm_config(g, over, 9).str().find("cta-pairs-multicast"), std::string::npos);
  over.multicast = 2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "multicast", "2");
  over.multicast = 1, over.cluster = 1;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "multicast", "cluster=1");
  over.cluster = -1;  // pairs left to the choice: 2 experts get one CTA per tile
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "multicast",
                  "one CTA per tile chosen");
  over.sm90 = 0;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "multicast", "mma.sync");
  over.sm90 = -1;
  over.multicast = -1, over.cluster = 2;
  over.tma = 0;  // multicast needs the weights by TMA
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "cluster", "tma=0");
  over.tma = -1, over.sm90 = 1;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "cluster", "sm90=1");
  over.sm90 = 0;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "cluster", "mma.sync");
  over.sm90 = -1, over.gemv = 1, over.block_m = 16;
  HostTensor tiles16(DType::kI32, {64});
  g.tile_expert = tiles16.view();
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "gemv", "cluster=2");
  over.gemv = -1, over.block_m = 0, over.cluster = 3;
  g.tile_expert = tiles.view();
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "cluster", "3");
}

// CTA pairs are chosen for the gated projection where 256 experts or more
// average 0.75..1.25 128-row tiles each, with half_skip; an explicit key wins.
TEST(MoeGroupedGemmCpu, PairsChosenAroundOneTilePerExpert) {
  HostTensor a(DType::kBF16, {1024, 256}), w(DType::kBF16, {256, 256, 256}), few(DType::kBF16, {255, 256, 256}),
      idx(DType::kI32, {1024}), out(DType::kBF16, {1024, 256}), tiles(DType::kI32, {8});
  ops::MoeGroupedGemmArgs g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view(), true);
  const ops::MoeGroupedGemmConfig none;
  const int64_t one = 256 * 128;  // 256 experts x one 128-row tile
  for (auto [rows, want] : {std::pair{one * 3 / 4 - 1, 1}, std::pair{one * 3 / 4, 2}, std::pair{one, 2},
                            std::pair{one * 5 / 4, 2}, std::pair{one * 5 / 4 + 1, 1}, std::pair{2 * one, 1}}) {
    g.rows_used = rows;
    const auto c = ops::moe_grouped_gemm_config(g, none, 9, 132);
    EXPECT_EQ(c.block_m, 128);
    EXPECT_EQ(c.cluster, want) << rows << " rows";
    EXPECT_EQ(c.multicast, 0) << rows << " rows";
    // (From 256 rows per expert half_skip is on anyway: HalfSkipConfig.)
    EXPECT_EQ(c.half_skip, want == 2 || rows >= 2 * one ? 1 : 0) << rows << " rows";
  }
  g.rows_used = one;
  ops::MoeGroupedGemmConfig over;
  over.half_skip = 0;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9, 132).cluster, 2);
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9, 132).half_skip, 0);
  over.half_skip = -1, over.cluster = 1;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9, 132).cluster, 1);
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9, 132).half_skip, 0);
  over.cluster = -1, over.multicast = 1;  // multicast on chosen pairs
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9, 132).cluster, 2);
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9, 132).multicast, 1);
  over.multicast = -1, over.tma = 0;  // pairs need the weights by TMA
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9, 132).cluster, 1);
  g.w_up.reset();  // the plain projection keeps one CTA per tile
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, none, 9, 132).cluster, 1);
  g = gathered_args(a.view(), few.view(), out.view(), tiles.view(), idx.view(), true);
  g.rows_used = 255 * 128;  // fewer than 256 experts (Mixtral T=512 lost)
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, none, 9, 132).cluster, 1);
}

// Experts of N * K >= 2^31 elements: the warp-specialised kernel with TMA
// weights takes them; without TMA (over 64 per-expert tensors) the default
// falls back to the sm90=1 kernel, and forcing sm90=2 names the limit.
TEST(MoeGroupedGemmCpu, HugeExpertsPickAKernelThatAddressesThem) {
  const int64_t N = 65536, K = 65536, rows = 1024;
  ops::MoeGroupedGemmArgs g = gathered_args(
      shape_only(DType::kBF16, {rows, K}), shape_only(DType::kBF16, {2, N, K}),
      shape_only(DType::kBF16, {rows, N}), shape_only(DType::kI32, {rows / 128}),
      shape_only(DType::kI32, {rows}));
  const ops::MoeGroupedGemmConfig over;
  auto c = ops::moe_grouped_gemm_config(g, over, 9);
  EXPECT_EQ(c.sm90, 2);
  EXPECT_EQ(c.tma, 1);
  g.w.stacked.reset();
  for (int e = 0; e < 65; ++e) g.w.per_expert.push_back(shape_only(DType::kBF16, {N, K}));
  c = ops::moe_grouped_gemm_config(g, over, 9);
  EXPECT_EQ(c.sm90, 1);
  ops::MoeGroupedGemmConfig ws;
  ws.sm90 = 2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, ws, 9), ErrorKind::kInvalidArgument, "sm90", "2^31");
}

// Split K: opt-in on the mma.sync kernel only; its kernel and the reduce
// compile for sm_90a.
TEST(MoeGroupedGemmCpu, SplitKConfig) {
  HostTensor a(DType::kBF16, {4, 1024}), w(DType::kBF16, {8, 384, 1024}), out(DType::kBF16, {128, 384});
  HostTensor tiles(DType::kI32, {8}), idx(DType::kI32, {128});
  ops::MoeGroupedGemmArgs g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view(), true);
  ops::MoeGroupedGemmConfig over;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).k_splits, 1);
  over.k_splits = 4;
  const auto c = ops::moe_grouped_gemm_config(g, over, 9);
  EXPECT_EQ(c.k_splits, 4);
  EXPECT_NE(c.str().find("split-k=4"), std::string::npos) << c.str();
  const auto spec = ops::moe_grouped_gemm_kernel_spec(g, c);
  EXPECT_EQ(spec.function, "tc::moe::grouped_gemm_split_kernel");
  EXPECT_EQ(jit::compile(spec, {}, "sm_90a")->resources.spill_store_bytes, 0);
  for (const char* out_t : {"tc::bf16", "float"})
    EXPECT_NO_THROW(jit::compile({"moe/grouped_gemm.cuh", "tc::moe::grouped_gemm_split_reduce_kernel",
                                  {out_t, "16", "true", "false"}, "reduce"},
                                 {}, "sm_90a"));
  over.k_splits = 65;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "k_splits", "65");
  HostTensor one_tile(DType::kI32, {1});  // 128-row tiles: a wgmma kernel by default
  g.tile_expert = one_tile.view();
  over.k_splits = 2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "k_splits", "sm90=2");
  over.sm90 = 0;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).k_splits, 2);
}

// The split-K choice on 132 SMs, on the layer's decode layouts (M = T*K +
// E*(block_m-1), rounded to the tile; rows_used = T*K): Qwen3-30B T=1 gate/up (96 live
// tiles, 32 k-steps) splits in two; its down GEMM (128 tiles, 12 k-steps)
// and DeepSeek-V3 T=1 gate/up (288 tiles) do not; no split without an SM count.
TEST(MoeGroupedGemmCpu, SplitKChoice) {
  auto choice = [](int64_t T, int64_t K, int64_t E, int64_t N, int64_t Kdim, bool gated, int sms) {
    const int64_t M = ops::moe_fused_mapping_rows(T, K, E, 16);
    HostTensor a(DType::kBF16, {T, Kdim}), w(DType::kBF16, {E, N, Kdim}), out(DType::kBF16, {M, N});
    HostTensor tiles(DType::kI32, {M / 16}), idx(DType::kI32, {M});
    ops::MoeGroupedGemmArgs g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view(), gated);
    g.rows_used = T * K;
    ops::MoeGroupedGemmConfig over;
    over.gemv = 0;  // the mma.sync kernel's heuristic (decode would otherwise take the gemv kernel)
    return ops::moe_grouped_gemm_config(g, over, 9, sms).k_splits;
  };
  EXPECT_EQ(choice(1, 8, 128, 768, 2048, true, 132), 2);
  EXPECT_EQ(choice(1, 8, 128, 2048, 768, false, 132), 1);
  EXPECT_EQ(choice(1, 8, 256, 2048, 7168, true, 132), 1);
  EXPECT_EQ(choice(1, 8, 128, 768, 2048, true, 0), 1);
  EXPECT_EQ(choice(1, 1, 4, 256, 8192, false, 132), 4);  // 2 live tiles, 128 k-steps: at most 4 slices
}

// The decode kernel: chosen where the routed slots average at most one row
// per expert, for [N, K] weights on 16- or 32-row schedules; asked for where
// it cannot run, a named error.
TEST(MoeGroupedGemmCpu, GemvChoice) {
  const int64_t E = 128, N = 768;
  auto run = [&](int64_t T, int64_t topk, int64_t bm, ops::MoeGroupedGemmConfig over, bool kn = false,
                 bool gated = true, int64_t Kd = 2048) {
    const int64_t M = ops::moe_fused_mapping_rows(T, topk, E, bm);
    HostTensor a(DType::kBF16, {T, Kd}), w(DType::kBF16, kn ? Shape{E, Kd, N} : Shape{E, N, Kd}),
        out(DType::kBF16, {M, N}), tiles(DType::kI32, {M / bm}), idx(DType::kI32, {M});
    ops::MoeGroupedGemmArgs g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view(), gated);
    if (kn) g.w.layout = ops::WeightLayout::kKN;
    if (kn && gated) g.w_up->layout = ops::WeightLayout::kKN;
    g.rows_used = T * topk;
    return ops::moe_grouped_gemm_config(g, over, 9, 132);
  };
  const ops::MoeGroupedGemmConfig pick;
  const auto t1 = run(1, 8, 16, pick);
  EXPECT_EQ(t1.gemv, 1);
  EXPECT_EQ(t1.k_splits, 1);
  EXPECT_NE(t1.str().find("gemv"), std::string::npos) << t1.str();
  EXPECT_EQ(run(16, 8, 16, pick).gemv, 1);   // 128 slots on 128 experts
  EXPECT_EQ(run(32, 8, 16, pick).gemv, 0);   // 256 slots: two rows per expert on average
  EXPECT_EQ(run(1, 8, 16, pick, true).gemv, 0);  // [K, N] weights: the MMA kernels
  ops::MoeGroupedGemmConfig on;
  on.gemv = 1;
  EXPECT_EQ(run(64, 8, 32, on).gemv, 1);  // forced at 4 rows per expert: passes of 4 rows
  TC_EXPECT_ERROR(run(1, 8, 16, on, true), ErrorKind::kInvalidArgument, "moe_grouped_gemm", "gemv", "[N, K] weights",
                  "KN weights");
  TC_EXPECT_ERROR(run(2048, 8, 128, on), ErrorKind::kInvalidArgument, "gemv", "16- or 32-row tiles", "block_m 128");
  auto both = on;
  both.k_splits = 2;
  TC_EXPECT_ERROR(run(1, 8, 16, both), ErrorKind::kInvalidArgument, "gemv", "k_splits=2");
  // Chosen, not forced: an MMA-only override (split K, tile width) picks the MMA kernels.
  ops::MoeGroupedGemmConfig split;
  split.k_splits = 2;
  EXPECT_EQ(run(1, 8, 16, split).gemv, 0);
  EXPECT_EQ(run(1, 8, 16, split).k_splits, 2);
  ops::MoeGroupedGemmConfig wide;
  wide.block_n = 64;
  EXPECT_EQ(run(1, 8, 16, wide).gemv, 0);
  // Columns per item: 8 weight rows per lane step, so 32 for gate/up, 64 plain.
  EXPECT_EQ(t1.block_n, 32);
  // Weights per output column (K x matrices) of at least 4096 elements: gated
  // at K = 2048, plain from K = 4096 (the layer's down projections at
  // K = 768 and 2048 ran faster on the MMA kernels).
  EXPECT_EQ(run(1, 8, 16, pick, false, false).gemv, 0);
  EXPECT_EQ(run(1, 8, 16, pick, false, true, 1024).gemv, 0);
  const auto plain = run(1, 8, 16, pick, false, false, 4096);
  EXPECT_EQ(plain.gemv, 1);
  EXPECT_EQ(plain.block_n, 64);
  // With gemv=1, block_n picks the columns per item: the default or half.
  auto narrow = on;
  narrow.block_n = 16;
  EXPECT_EQ(run(1, 8, 16, narrow).block_n, 16);
  TC_EXPECT_ERROR(run(1, 8, 16, narrow, false, false), ErrorKind::kInvalidArgument, "block_n", "64 or 32", "16");
  narrow.block_n = 64;
  TC_EXPECT_ERROR(run(1, 8, 16, narrow), ErrorKind::kInvalidArgument, "block_n", "32 or 16", "64");
  narrow.block_n = 32;
  EXPECT_EQ(run(1, 8, 16, narrow, false, false).block_n, 32);
  ops::MoeGroupedGemmConfig other_height;  // the schedule's 16-row tiles decide
  other_height.block_m = 64;
  TC_EXPECT_ERROR(run(1, 8, 16, other_height), ErrorKind::kInvalidArgument, "block_m", "16 (the tile schedule's",
                  "64");
  ops::MoeGroupedGemmConfig bad;
  bad.gemv = 2;
  TC_EXPECT_ERROR(run(1, 8, 16, bad), ErrorKind::kInvalidArgument, "gemv", "-1 (choose)", "2");
}

// row_token marks padding rows of contiguous A: they read zeros (outputs 0 x
// scale) whatever A holds there; it must be int32 [M], and A by TMA (which
// cannot skip rows) is then refused.
// The decode kernel at both item widths, gated and plain, fp16 and bf16:
// no spills on sm_90a and sm_80, and the narrow items fit 3 CTAs of 256
// threads per SM on sm_90a (grouped_gemv_min_ctas).
TEST(MoeGroupedGemmCpu, GemvKernelsCompileWithoutSpills) {
  const int64_t E = 8, N = 256, K = 512, T = 1, topk = 4, bm = 16;
  const int64_t M = ops::moe_fused_mapping_rows(T, topk, E, bm);
  for (DType dt : {DType::kBF16, DType::kF16})
    for (bool gated : {true, false})
      for (bool narrow : {false, true}) {
        HostTensor a(dt, {T, K}), w(dt, {E, N, K}), out(dt, {M, N}), tiles(DType::kI32, {M / bm}),
            idx(DType::kI32, {M});
        ops::MoeGroupedGemmArgs g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view(), gated);
        g.rows_used = T * topk;
        ops::MoeGroupedGemmConfig over;
        over.gemv = 1;
        if (narrow) over.block_n = gated ? 16 : 32;
        const auto c = ops::moe_grouped_gemm_config(g, over, 9, 132);
        const auto spec = ops::moe_grouped_gemm_kernel_spec(g, c);
        for (const char* arch : {"sm_90a", "sm_80"}) {
          SCOPED_TRACE(spec.config + " " + arch);
          const auto k = jit::compile(spec, {}, arch);
          EXPECT_EQ(k->resources.spill_store_bytes, 0);
          EXPECT_EQ(k->resources.stack_frame_bytes, 0);
          if (narrow && std::string(arch) == "sm_90a") {
            EXPECT_LE(k->resources.registers, 80);
          }
        }
      }
}

namespace {
// The decode path's two launches on a per-row schedule of T tokens x S
// slots: gate/up (a_repeat = S, gated, out [T S, N]) and down + combine
// (combine = S, plain, out [T, N]). `ids` [T S], `scale` [T S].
ops::MoeGroupedGemmArgs per_row_args(TensorView a, TensorView w, TensorView out, TensorView ids, int64_t S,
                                     bool combine, std::optional<TensorView> scale = std::nullopt) {
  ops::MoeGroupedGemmArgs g;
  g.a = a;
  g.w.stacked = w;
  if (!combine) g.w_up = ops::ExpertWeights{w, {}, ops::WeightLayout::kNK};
  g.out = out;
  g.tile_expert = ids;
  (combine ? g.combine : g.a_repeat) = S;
  g.row_scale = scale;
  return g;
}
}  // namespace

// Both decode-path kernels, every width, fp16 and bf16, sm_90a and sm_80:
// no spills, no stack. (bulk=0: the register-load kernels; the bulk ones
// have a test of their own.)
TEST(MoeGroupedGemmCpu, PerRowKernelsCompileWithoutSpills) {
  const int64_t E = 8, N = 256, K = 512, T = 2, S = 4;
  for (DType dt : {DType::kBF16, DType::kF16})
    for (bool combine : {false, true})
      for (int bn : combine ? std::vector<int>{8, 16} : std::vector<int>{16, 32}) {
        HostTensor a(dt, {combine ? T * S : T, K}), w(dt, {E, N, K}), out(dt, {combine ? T : T * S, N}),
            ids(DType::kI32, {T * S}), scale(DType::kF32, {T * S});
        const auto g = per_row_args(a.view(), w.view(), out.view(), ids.view(), S, combine, scale.view());
        ops::MoeGroupedGemmConfig over;
        over.block_n = bn;
        over.bulk = 0;
        const auto c = ops::moe_grouped_gemm_config(g, over, 9, 132);
        EXPECT_EQ(c.gemv, 1);
        EXPECT_EQ(c.block_m, 1);
        const auto spec = ops::moe_grouped_gemm_kernel_spec(g, c);
        EXPECT_EQ(spec.function, combine ? "tc::moe::grouped_gemv_combine_kernel" : "tc::moe::grouped_gemv_kernel");
        for (const char* arch : {"sm_90a", "sm_80"}) {
          SCOPED_TRACE(spec.config + " " + arch);
          const auto k = jit::compile(spec, {}, arch);
          EXPECT_EQ(k->resources.spill_store_bytes, 0);
          EXPECT_EQ(k->resources.stack_frame_bytes, 0);
          // 2 CTAs of 256 per SM; narrow gate/up items 3 on sm_90a.
          EXPECT_LE(k->resources.registers, !combine && bn == 16 && std::string(arch) == "sm_90a" ? 80 : 128);
        }
      }
}

// The decode combine kernel's preload: off by default, on request where it
// applies (settled schedule, sm_90, register loads, the first item's rows
// within 100 KB), an error elsewhere; the carveout follows it unless given.
TEST(MoeGroupedGemmCpu, DecodePreloadChoice) {
  const int64_t E = 16, N = 256, T = 1, S = 8;
  for (int64_t K : {int64_t(768), int64_t(4096)}) {
    SCOPED_TRACE("K = " + std::to_string(K));
    HostTensor a(DType::kBF16, {T * S, K}), w(DType::kBF16, {E, N, K}), out(DType::kBF16, {T, N}),
        ids(DType::kI32, {T * S}), scale(DType::kF32, {T * S});
    auto g = per_row_args(a.view(), w.view(), out.view(), ids.view(), S, true, scale.view());
    g.schedule_settled = true;
    ops::MoeGroupedGemmConfig over;
    over.bulk = 0, over.block_n = 8;
    const auto c = ops::moe_grouped_gemm_config(g, over, 9, 132);
    EXPECT_EQ(c.preload, 0);
    EXPECT_EQ(c.carveout, 0);
    over.preload = 1;
    if (S * 8 * K * 2 <= ops::moe_grouped_gemm_max_preload_bytes) {
      const auto on = ops::moe_grouped_gemm_config(g, over, 9, 132);
      EXPECT_EQ(on.preload, 1);
      EXPECT_EQ(on.carveout, 1) << "the carveout follows the preload";
      over.carveout = 0;
      EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9, 132).carveout, 0);
    } else {
      TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9, 132), ErrorKind::kInvalidArgument, "preload",
                      "bytes per CTA");
    }
  }
}

// The bulk decode kernels (weights through a shared-memory ring): allowed on
// sm_90 for the decode path's two per-row projections, never elsewhere
// (bulk=1 there is an error naming why); both modes, fp16 and bf16, compile
// without spills or stack. A column must fit half the ring: gate/up at K =
// 7168 does (2 rows, 28 KB), the combine of 8 slots at K = 7168 (114 KB)
// does not and keeps the register-load kernel. Chosen by default only for
// gate/up streaming at least 896 KiB of weights per SM (BulkByDefault).
TEST(MoeGroupedGemmCpu, BulkDecodeKernels) {
  const int64_t E = 8, N = 256, T = 2, S = 8;
  for (int64_t K : {int64_t(512), int64_t(7168)})
    for (DType dt : {DType::kBF16, DType::kF16})
      for (bool combine : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "K=" << K << " combine=" << combine << " " << dtype_name(dt));
        HostTensor a(dt, {combine ? T * S : T, K}), w(dt, {E, N, K}), out(dt, {combine ? T : T * S, N}),
            ids(DType::kI32, {T * S}), scale(DType::kF32, {T * S});
        const auto g = per_row_args(a.view(), w.view(), out.view(), ids.view(), S, combine, scale.view());
        EXPECT_EQ(ops::moe_grouped_gemm_config(g, {}, 9, 132).bulk, 0) << "under 896 KiB of weights per SM";
        ops::MoeGroupedGemmConfig on;
        on.bulk = 1;
        if (combine && K == 7168) {
          TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, on, 9, 132), ErrorKind::kInvalidArgument, "bulk",
                          "too large");
          continue;
        }
        const auto c = ops::moe_grouped_gemm_config(g, on, 9, 132);
        EXPECT_EQ(c.bulk, 1);
        EXPECT_EQ(ops::moe_grouped_gemm_config(g, {}, 8, 132).bulk, 0) << "sm_80: register loads";
        TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, on, 8, 132), ErrorKind::kInvalidArgument, "bulk", "sm_8x");
        const auto spec = ops::moe_grouped_gemm_kernel_spec(g, c);
        EXPECT_EQ(spec.function, "tc::moe::grouped_gemv_bulk_kernel");
        if (K != 512) continue;
        const auto k = jit::compile(spec, {}, "sm_90a");
        EXPECT_EQ(k->resources.spill_store_bytes, 0);
        EXPECT_EQ(k->resources.stack_frame_bytes, 0);
      }
  // bulk_cols: output columns per piece, for the bulk kernel only, within
  // 64 weight rows and two stages; a launch parameter (same kernel).
  {
    HostTensor a(DType::kBF16, {1, 4096}), w(DType::kBF16, {E, N, 4096}), out(DType::kBF16, {S, N}),
        ids(DType::kI32, {S}), scale(DType::kF32, {S});
    const auto g = per_row_args(a.view(), w.view(), out.view(), ids.view(), S, false, scale.view());
    ops::MoeGroupedGemmConfig cols;
    ops::set_config_key(cols, "bulk_cols", 3, "moe_grouped_gemm", "--config");
    TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, cols, 9, 132), ErrorKind::kInvalidArgument, "bulk_cols",
                    "the bulk kernel", "bulk=0");
    cols.bulk = 1;
    const auto c = ops::moe_grouped_gemm_config(g, cols, 9, 132);
    EXPECT_EQ(c.bulk_cols, 3);
    ops::MoeGroupedGemmConfig on;
    on.bulk = 1;
    EXPECT_EQ(ops::moe_grouped_gemm_kernel_spec(g, c).function,
              ops::moe_grouped_gemm_kernel_spec(g, ops::moe_grouped_gemm_config(g, on, 9, 132)).function);
    EXPECT_NE(c.str().find("3 columns per piece"), std::string::npos) << c.str();
    for (int v : {33, -1}) {  // 32 columns of gate and up rows at most
      cols.bulk_cols = v;
      const std::string given = "got " + std::to_string(v);
      TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, cols, 9, 132), ErrorKind::kInvalidArgument, "bulk_cols",
                      "1..32", given.c_str());
    }
    cols.bulk_cols = 27;  // 27 x 16 KB: not two stages in 216 KB
    TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, cols, 9, 132), ErrorKind::kInvalidArgument, "bulk_cols",
                    "two stages", "27");
  }
  {
    HostTensor a(DType::kBF16, {256, 64}), w(DType::kBF16, {2, 128, 64}), out(DType::kBF16, {256, 128});
    ops::MoeGroupedGemmArgs g;
    g.a = a.view(), g.w.stacked = w.view(), g.out = out.view();
    ops::MoeGroupedGemmConfig cols;
    cols.bulk_cols = 2;
    TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, cols, 9, 132), ErrorKind::kInvalidArgument, "bulk_cols",
                    "the bulk decode kernel", "the MMA kernels");
  }
  ops::MoeGroupedGemmConfig bad;
  ops::set_config_key(bad, "bulk", 2, "moe_grouped_gemm", "--config");
  HostTensor a(DType::kBF16, {2, 64}), w(DType::kBF16, {E, N, 64}), out(DType::kBF16, {2 * S, N}),
      ids(DType::kI32, {2 * S}), scale(DType::kF32, {2 * S});
  const auto g = per_row_args(a.view(), w.view(), out.view(), ids.view(), S, false, scale.view());
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, bad, 9, 132), ErrorKind::kInvalidArgument, "bulk", "-1 (choose)",
                  "2");
}

// The bulk kernel's default piece width (bulk_plan, reported in the
// resolved config's bulk_cols): stages of about 32 KB, but two gated
// columns rather than one where four stages still fit (H200, session 32:
// at H = 5120 one column per piece ran 6% slower than two), one at H = 7168
// (two would leave three stages). 0 without the bulk kernel.
TEST(MoeGroupedGemmCpu, BulkPieceWidths) {
  const int64_t E = 8, N = 256, S = 8;
  for (auto [K, want] : {std::pair<int64_t, int>{2048, 4}, {3072, 2}, {4096, 2}, {5120, 2}, {6144, 2}, {7168, 1}}) {
    SCOPED_TRACE(::testing::Message() << "K=" << K);
    HostTensor a(DType::kBF16, {1, K}), w(DType::kBF16, {E, N, K}), out(DType::kBF16, {S, N}),
        ids(DType::kI32, {S}), scale(DType::kF32, {S});
    const auto g = per_row_args(a.view(), w.view(), out.view(), ids.view(), S, false, scale.view());
    ops::MoeGroupedGemmConfig on;
    on.bulk = 1;
    const auto c = ops::moe_grouped_gemm_config(g, on, 9, 132);
    EXPECT_EQ(c.bulk_cols, want);
    EXPECT_NE(c.str().find(std::to_string(want) + " columns per piece"), std::string::npos) << c.str();
    EXPECT_EQ(ops::moe_grouped_gemm_config(g, {}, 8, 132).bulk_cols, 0) << "sm_80: register loads";
  }
}

// The decode path at DeepSeek-V3 T = 1 (bulk gate/up, then the register
// down + combine kernel): one combine CTA is meant to fit on an SM beside
// the bulk CTA, registers (allocated 8 per thread at a time) and shared
// memory (1 KB reserved per CTA) both, so the down projection's CTAs are
// resident early (programmatic dependent launch) while gate/up streams;
// that is why the ring stops at 216 KB. (H200, session 22: a combine
// variant at 116 registers lost the ~3 us by which the experts scope beats
// gate_up + down, 174 -> 178 us; by these rules it still fit, with no
// register to spare, so the hardware may be stricter than this check.)
TEST(MoeGroupedGemmCpu, DecodeDownFitsBesideBulkGateUp) {
  const int64_t E = 8, H = 7168, I = 2048, S = 8;
  HostTensor x(DType::kBF16, {1, H}), wg(DType::kBF16, {E, I, H}), h(DType::kBF16, {S, I}),
      wd(DType::kBF16, {E, H, I}), out(DType::kBF16, {1, H}), ids(DType::kI32, {S}), scale(DType::kF32, {S});
  const auto gate_up = per_row_args(x.view(), wg.view(), h.view(), ids.view(), S, false, scale.view());
  const auto down = per_row_args(h.view(), wd.view(), out.view(), ids.view(), S, true, scale.view());
  const auto cu = ops::moe_grouped_gemm_config(gate_up, {}, 9, 132), cd = ops::moe_grouped_gemm_config(down, {}, 9, 132);
  ASSERT_EQ(cu.bulk, 1);
  ASSERT_EQ(cd.bulk, 0);
  const auto ku = jit::compile(ops::moe_grouped_gemm_kernel_spec(gate_up, cu), {}, "sm_90a");
  const auto kd = jit::compile(ops::moe_grouped_gemm_kernel_spec(down, cd), {}, "sm_90a");
  auto regs = [](int r, int threads) { return (r + 7) / 8 * 8 * threads; };
  EXPECT_LE(regs(ku->resources.registers, 544) + regs(kd->resources.registers, 256), 65536)
      << "gate/up " << ku->resources.registers << " and down " << kd->resources.registers << " registers per thread";
  EXPECT_LE(216 * 1024 + ku->resources.smem_static_bytes + kd->resources.smem_static_bytes + 2 * 1024, 228 * 1024)
      << "static shared memory: gate/up " << ku->resources.smem_static_bytes << ", down "
      << kd->resources.smem_static_bytes;
}

// bulk = -1 on sm_90: gate/up takes the bulk kernel from 896 KiB of
// weights per SM (DeepSeek-V3 T = 1: 8 rows x 2048 x 2 x 7168 bf16 = 470 MB,
// 3.4 MiB per SM; one expert suffices, the rows all name it; Qwen3-235B
// T = 1: 8 x 1536 x 2 x 4096 = 201 MB, 1.45 MiB; 8 x 1024 x 2 x 4096, 0.97
// MiB), not below it (8 x 1536 x 2 x 2048, 0.73 MiB; Qwen3-30B: 50 MB,
// 0.36 MiB), and never the combine. No GPU (0 SMs, a compile-only run): as
// on 132 SMs.
TEST(MoeGroupedGemmCpu, BulkByDefault) {
  struct Case {
    int64_t N, K;
    bool combine;
    int sm_count, want;
  };
  for (const Case& k : {Case{2048, 7168, false, 132, 1}, Case{768, 2048, false, 132, 0},
                        Case{768, 2048, false, 16, 1}, Case{1536, 4096, false, 132, 1},
                        Case{1024, 4096, false, 132, 1}, Case{1536, 2048, false, 132, 0},
                        Case{1536, 4096, false, 512, 0},
                        Case{7168, 2048, true, 132, 0}, Case{2048, 7168, false, 8192, 0},
                        Case{2048, 7168, false, 0, 1}, Case{768, 2048, false, 0, 0}}) {
    SCOPED_TRACE(::testing::Message() << "N=" << k.N << " K=" << k.K << " combine=" << k.combine
                                      << " SMs=" << k.sm_count);
    const int64_t S = 8;
    HostTensor a(DType::kBF16, {k.combine ? S : 1, k.K}), w(DType::kBF16, {1, k.N, k.K}),
        out(DType::kBF16, {k.combine ? 1 : S, k.N}), ids(DType::kI32, {S}), scale(DType::kF32, {S});
    const auto g = per_row_args(a.view(), w.view(), out.view(), ids.view(), S, k.combine, scale.view());
    EXPECT_EQ(ops::moe_grouped_gemm_config(g, {}, 9, k.sm_count).bulk, k.want);
  }
}

// Per-row schedules: only the decode kernel runs them; combine needs one,
// a plain projection and at most 32 slots; a_repeat no a_index; block_n
// widths; the default width spreads the items evenly over the SMs.
// half_skip (warp-specialised kernel, -1..1), prefetch (decode combine
// kernel, -1..1) and balance (decode kernels, -1..1): launch parameters.
TEST(MoeGroupedGemmCpu, HalfSkipConfig) {
  ops::MoeGroupedGemmConfig c;
  ops::set_config_key(c, "half_skip", 0, "moe_grouped_gemm", "--config");
  EXPECT_EQ(c.half_skip, 0);
  HostTensor a(DType::kBF16, {256, 64}), w(DType::kBF16, {2, 128, 64}), out(DType::kBF16, {256, 128}),
      tiles(DType::kI32, {2}), idx(DType::kI32, {256}), fill(DType::kI32, {256}), fill_bad(DType::kI32, {255});
  auto g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view());
  g.tile_fill = fill.view();
  EXPECT_NO_THROW(ops::validate_moe_grouped_gemm(g, DeviceType::kCPU));
  g.rows_used = 511;  // 2 experts: chosen on from 256 rows per expert
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, {}, 9, 132).half_skip, 0);
  g.rows_used = 512;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, {}, 9, 132).half_skip, 1);
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, c, 9, 132).half_skip, 0);
  c.half_skip = 1, g.rows_used = 0;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, c, 9, 132).half_skip, 1);
  c.half_skip = 0;
  c.half_skip = 2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, c, 9, 132), ErrorKind::kInvalidArgument, "half_skip", "2");
  g.tile_fill = fill_bad.view();
  TC_EXPECT_ERROR(ops::validate_moe_grouped_gemm(g, DeviceType::kCPU), ErrorKind::kInvalidArgument, "tile_fill",
                  "256");
  // prefetch (decode combine kernel): -1..1, chosen off.
  ops::MoeGroupedGemmConfig pf;
  g.tile_fill = fill.view();
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, pf, 9, 132).prefetch, 0);
  ops::set_config_key(pf, "prefetch", 1, "moe_grouped_gemm", "--config");
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, pf, 9, 132).prefetch, 1);
  pf.prefetch = 2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, pf, 9, 132), ErrorKind::kInvalidArgument, "prefetch", "2");
  // balance (decode kernels on per-row schedules): -1..2, chosen 1.
  ops::MoeGroupedGemmConfig bal;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, bal, 9, 132).balance, 1);
  ops::set_config_key(bal, "balance", 0, "moe_grouped_gemm", "--config");
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, bal, 9, 132).balance, 0);
  bal.balance = 2;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, bal, 9, 132).balance, 2);
  bal.balance = 3;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, bal, 9, 132), ErrorKind::kInvalidArgument, "balance", "3");
}

// The tile order: one row tile at a time (group_m = 1) where the experts
// average at most half a tile of rows, else groups of 8; an override wins.
TEST(MoeGroupedGemmCpu, GroupOrderConfig) {
  HostTensor a(DType::kBF16, {256, 64}), w(DType::kBF16, {2, 128, 64}), out(DType::kBF16, {256, 128}),
      tiles(DType::kI32, {2}), idx(DType::kI32, {256});
  auto g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view());  // 128-row tiles, 2 experts
  g.rows_used = 128;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, {}, 9, 132).group_m, 1);
  g.rows_used = 129;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, {}, 9, 132).group_m, 8);
  g.rows_used = 0;  // unknown
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, {}, 9, 132).group_m, 8);
  ops::MoeGroupedGemmConfig over;
  ops::set_config_key(over, "group_m", 4, "moe_grouped_gemm", "--config");
  g.rows_used = 16;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9, 132).group_m, 4);
}

// The gated projection of 64+ experts at up to two row tiles each, on single
// CTAs, also one row tile at a time; not plain projections, not CTA pairs,
// not few experts, not beyond two tiles per expert.
TEST(MoeGroupedGemmCpu, GatedManyExpertsGroupOrder) {
  const int64_t E = 128, K = 128, N = 128, M = 4 * 128 * E;
  HostTensor a(DType::kBF16, {M, K}), w(DType::kBF16, {E, N, K}), out(DType::kBF16, {M, N}),
      tiles(DType::kI32, {M / 128}), idx(DType::kI32, {M});
  auto g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view(), true);
  const auto group = [&](int64_t rows, const ops::MoeGroupedGemmConfig& over = {}) {
    g.rows_used = rows;
    const auto c = ops::moe_grouped_gemm_config(g, over, 9, 132);
    EXPECT_EQ(c.sm90, 2) << c.str();
    return c.group_m;
  };
  EXPECT_EQ(group(2 * 128 * E), 1);      // two tiles per expert
  EXPECT_EQ(group(85 * E), 1);           // 0.66 tiles (Kimi-K2 T=4096-like)
  EXPECT_EQ(group(2 * 128 * E + 1), 8);  // past two tiles
  EXPECT_EQ(group(0), 8);                // rows unknown
  ops::MoeGroupedGemmConfig pairs;
  pairs.cluster = 2;
  EXPECT_EQ(group(128 * E, pairs), 8);
  ops::MoeGroupedGemmConfig given;
  given.group_m = 8;
  EXPECT_EQ(group(128 * E, given), 8);
  g.w_up.reset();  // a plain projection keeps groups of 8
  EXPECT_EQ(group(128 * E), 8);
  HostTensor w8(DType::kBF16, {8, N, K});
  g = gathered_args(a.view(), w8.view(), out.view(), tiles.view(), idx.view(), true);
  EXPECT_EQ(group(128 * 8), 8);  // 8 experts (Mixtral T=512-like)
}

TEST(MoeGroupedGemmCpu, PerRowScheduleConfig) {
  const int64_t E = 8, N = 2048, K = 768, T = 1, S = 8;
  HostTensor a(DType::kBF16, {T * S, K}), w(DType::kBF16, {E, N, K}), out(DType::kBF16, {T, N}),
      ids(DType::kI32, {T * S}), idx(DType::kI32, {T * S});
  auto g = per_row_args(a.view(), w.view(), out.view(), ids.view(), S, true);
  EXPECT_NO_THROW(ops::validate_moe_grouped_gemm(g, DeviceType::kCPU));
  // Qwen3-30B-shaped: 2048 columns x 1 token: 128 items of 16 columns
  // leave 4 of 132 SMs idle, so 8; with 128 SMs or fewer, 16.
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, {}, 9, 132).block_n, 8);
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, {}, 9, 128).block_n, 16);
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, {}, 9, 1000).block_n, 8);
  // DeepSeek-V3-shaped (7168 columns): 448 items of 16 cover 132 SMs.
  HostTensor w7(DType::kBF16, {E, 7168, K}), out7(DType::kBF16, {T, 7168});
  auto g7 = per_row_args(a.view(), w7.view(), out7.view(), ids.view(), S, true);
  EXPECT_EQ(ops::moe_grouped_gemm_config(g7, {}, 9, 132).block_n, 16);
  ops::MoeGroupedGemmConfig mma;
  mma.gemv = 0;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, mma, 9, 132), ErrorKind::kInvalidArgument, "moe_grouped_gemm",
                  "gemv", "per-row schedule");
  ops::MoeGroupedGemmConfig wide;
  wide.block_n = 32;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, wide, 9, 132), ErrorKind::kInvalidArgument, "block_n",
                  "8 or 16", "32");
  auto bad = g;
  bad.combine = 33;
  TC_EXPECT_ERROR(ops::validate_moe_grouped_gemm(bad, DeviceType::kCPU), ErrorKind::kInvalidArgument, "combine",
                  "1..32", "33");
  bad = g;
  bad.w_up = bad.w;
  TC_EXPECT_ERROR(ops::validate_moe_grouped_gemm(bad, DeviceType::kCPU), ErrorKind::kInvalidArgument, "w_up",
                  "plain projection");
  HostTensor tiles(DType::kI32, {1}), out16(DType::kBF16, {2, N}), a16(DType::kBF16, {16, K});
  bad = g;
  bad.a = a16.view(), bad.out = out16.view(), bad.tile_expert = tiles.view();  // one 16-row tile
  TC_EXPECT_ERROR(ops::validate_moe_grouped_gemm(bad, DeviceType::kCPU), ErrorKind::kInvalidArgument, "tile_expert",
                  "per-row schedule", "combine 8");
  // Gate/up: a_repeat with a_index is refused; A must hold M / a_repeat rows.
  HostTensor h(DType::kBF16, {T * S, N}), x(DType::kBF16, {T, K});
  auto up = per_row_args(x.view(), w.view(), h.view(), ids.view(), S, false);
  EXPECT_NO_THROW(ops::validate_moe_grouped_gemm(up, DeviceType::kCPU));
  EXPECT_EQ(ops::moe_grouped_gemm_config(up, {}, 9, 132).block_n, 32);  // 8 x 64 items: even at the widest
  bad = up;
  bad.a_index = idx.view();
  TC_EXPECT_ERROR(ops::validate_moe_grouped_gemm(bad, DeviceType::kCPU), ErrorKind::kInvalidArgument, "a_repeat",
                  "1 with an a_index", "8");
  bad = up;
  bad.a_repeat = 4;
  TC_EXPECT_ERROR(ops::validate_moe_grouped_gemm(bad, DeviceType::kCPU), ErrorKind::kInvalidArgument, "'a'",
                  "at least 2 rows");
}

// The CPU golden of the two per-row launches against a direct evaluation:
// a_repeat reads token r / S; combine sums a token's S rows in order, each
// times its scale, and rows whose expert is -1 or >= E add nothing.
TEST(MoeGroupedGemmCpu, PerRowGoldenMatchesDirectSums) {
  const int64_t E = 5, N = 24, K = 40, T = 3, S = 3;
  HostTensor x(DType::kBF16, {T, K}), w(DType::kBF16, {E, N, K}), h(DType::kF32, {T * S, N}),
      ids(DType::kI32, {T * S}), scale(DType::kF32, {T * S}), y(DType::kF32, {T, N});
  harness::fill_uniform(x.view(), 21, 1, -1.f, 1.f);
  harness::fill_uniform(w.view(), 21, 2, -1.f, 1.f);
  harness::fill_uniform(scale.view(), 21, 3, 0.25f, 1.f);
  const int32_t expert[] = {0, 4, 2, -1, 1, 3, 4, 5, 0};  // slot 3 dropped (-1), slot 7 outside (5 = E)
  std::memcpy(ids.data(), expert, sizeof(expert));
  auto dot = [&](int64_t t, int64_t e, int64_t n) {
    double v = 0;
    for (int64_t k = 0; k < K; ++k)
      v += load_as_double(x.data(), x.dtype(), size_t(t * K + k)) *
           load_as_double(w.data(), w.dtype(), size_t((e * N + n) * K + k));
    return v;
  };
  auto plain = per_row_args(x.view(), w.view(), h.view(), ids.view(), S, false);
  plain.w_up.reset();
  ops::moe_grouped_gemm_cpu(plain);
  for (int64_t r = 0; r < T * S; ++r) {
    if (expert[r] < 0 || expert[r] >= E) continue;
    for (int64_t n = 0; n < N; ++n)
      ASSERT_NEAR(h.ptr<float>()[r * N + n], dot(r / S, expert[r], n), 1e-4) << "row " << r << ", column " << n;
  }
  // combine: A = x repeated as T * S rows.
  HostTensor xs(DType::kBF16, {T * S, K});
  for (int64_t r = 0; r < T * S; ++r)
    std::memcpy(xs.ptr<uint16_t>() + r * K, x.ptr<uint16_t>() + (r / S) * K, size_t(K) * 2);
  std::memset(y.data(), 0xff, y.nbytes());
  ops::moe_grouped_gemm_cpu(per_row_args(xs.view(), w.view(), y.view(), ids.view(), S, true, scale.view()));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double want = 0;
      for (int64_t j = 0; j < S; ++j) {
        const int e = expert[t * S + j];
        if (e >= 0 && e < E) want += double(scale.ptr<float>()[t * S + j]) * dot(t, e, n);
      }
      ASSERT_NEAR(y.ptr<float>()[t * N + n], want, 1e-4 * (1 + std::fabs(want))) << "token " << t << ", column " << n;
    }
}

TEST(MoeGroupedGemmCpu, RowTokenMakesPaddingRowsZero) {
  const int64_t M = 16, K = 64, N = 24;
  HostTensor a(DType::kBF16, {M, K}), w(DType::kBF16, {1, N, K}), out(DType::kF32, {M, N});
  HostTensor tiles(DType::kI32, {1}), token(DType::kI32, {M}), scale(DType::kF32, {M});
  harness::fill_uniform(a.view(), 5, 1, -1.f, 1.f);
  harness::fill_uniform(w.view(), 5, 2, -1.f, 1.f);
  harness::fill_uniform(scale.view(), 5, 3, 0.5f, 2.f);
  tiles.ptr<int32_t>()[0] = 0;
  for (int64_t r = 0; r < M; ++r) token.ptr<int32_t>()[r] = r < 3 ? int32_t(7 * r) : -1;
  ops::MoeGroupedGemmArgs g;
  g.a = a.view();
  g.w.stacked = w.view();
  g.out = out.view();
  g.tile_expert = tiles.view();
  g.row_scale = scale.view();
  g.row_token = token.view();
  std::memset(out.data(), 0xff, out.nbytes());  // NaN poison
  ops::moe_grouped_gemm_cpu(g);
  for (int64_t r = 0; r < M; ++r) {
    double row_abs = 0;
    for (int64_t n = 0; n < N; ++n) row_abs += std::fabs(out.ptr<float>()[r * N + n]);
    if (r < 3) EXPECT_GT(row_abs, 0.1) << "row " << r;
    else EXPECT_EQ(row_abs, 0.0) << "row " << r;
  }
  HostTensor bad_token(DType::kI64, {M});
  auto bad = g;
  bad.row_token = bad_token.view();
  TC_EXPECT_ERROR(ops::validate_moe_grouped_gemm(bad, DeviceType::kCPU), ErrorKind::kType, "moe_grouped_gemm",
                  "row_token", "int32", "int64");
  ops::MoeGroupedGemmConfig tma_a;
  tma_a.sm90 = 2, tma_a.tma = 2;
  HostTensor a128(DType::kBF16, {128, K}), out128(DType::kBF16, {128, N}), token128(DType::kI32, {128});
  auto big = g;
  big.a = a128.view(), big.out = out128.view(), big.row_token = token128.view(), big.row_scale.reset();
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(big, tma_a, 9, 132), ErrorKind::kInvalidArgument, "tma",
                  "no row_token", "a row_token");
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
      "tc::moe::grouped_gemm_sm90_ws_kernel", "tc::moe::grouped_gemv_kernel",    "tc::moe::grouped_gemv_combine_kernel",
      "tc::moe::grouped_gemv_bulk_kernel",    "tc::moe::topk_gate_kernel",       "tc::moe::topk_gate_mapping_kernel",
      "tc::moe::fused_mapping_kernel",        "tc::moe::decode_split_kernel"};
  std::set<std::string> seen;
  const auto traced = jit::CompileOptions::parse("release,trace");
  for (const Listing& l : {Listing{4096, 7168, 2048, 256, -1}, Listing{256, 7168, 2048, 256, -1},
                           Listing{1, 2048, 768, 128, -1}, Listing{1, 7168, 2048, 256, -1},
                           Listing{1, 7168, 2048, 256, 0}}) {
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
    keep = {HostTensor(DType::kBF16, {T, H}), HostTensor(DType::kBF16, {E, H}), HostTensor(DType::kBF16, {E, i, H}),
            HostTensor(DType::kBF16, {E, i, H}), HostTensor(DType::kBF16, {E, H, i}), HostTensor(DType::kBF16, {T, H})};
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
  TC_EXPECT_ERROR(sm90_specs(layer(1, 100, keep), p, split), ErrorKind::kInvalidArgument,
                  "decode_split", "mapped path");  // I = 100: no decode path
  split.decode = 1;
  TC_EXPECT_ERROR(sm90_specs(layer(2, I, keep), p, split), ErrorKind::kInvalidArgument,
                  "decode_split", "T = 2");
  TC_EXPECT_ERROR(ops::fused_moe_options({{"decode_split", 3}}, "--config"), ErrorKind::kInvalidArgument,
                  "decode_split", "3");
  // Box heights: a multiple of 8 up to 256, and at least a gate/up column
  // pair (4 H bytes) per stage.
  TC_EXPECT_ERROR(ops::fused_moe_options({{"decode_split_box_rows", 12}}, "--config"),
                  ErrorKind::kInvalidArgument, "decode_split_box_rows", "12");
  TC_EXPECT_ERROR(ops::fused_moe_options({{"decode_split_box_rows", 264}}, "--config"),
                  ErrorKind::kInvalidArgument, "decode_split_box_rows", "264");
  split.decode = -1;
  split.decode_split_cols = 128;
  split.decode_split_box_rows = 8;  // H = 256: 1 KB of gate/up per column, a 2 KB stage holds it
  EXPECT_EQ(sm90_specs(layer(1, I, keep), p, split).back().function,
            "tc::moe::decode_split_combine_kernel");
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
  TC_EXPECT_ERROR(ops::decode_split_plan(8, 7168, 2048, 132, 40, 0), ErrorKind::kInvalidArgument,
                  "decode_split_cols", "40");  // does not divide I
  TC_EXPECT_ERROR(ops::decode_split_plan(8, 7168, 2048, 132, 48, 0), ErrorKind::kInvalidArgument,
                  "decode_split_cols", "48");  // under H / 128 = 56: no box holds a column pair
  TC_EXPECT_ERROR(ops::decode_split_plan(8, 7168, 2048, 132, 0, 104), ErrorKind::kInvalidArgument,
                  "decode_split_box_rows", "[112, 256]");
  EXPECT_EQ(ops::decode_split_plan(8, 7168, 2048, 132, 0, 0).pool_boxes, 8);  // of 64 boxes of 112 rows
  EXPECT_EQ(ops::decode_split_plan(8, 7168, 2048, 132, 0, 0, 0).pool_boxes, 0);  // none when asked
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
  TC_EXPECT_ERROR(ops::decode_split_plan(33, 512, 64, 132, 0, 0, -1, true), ErrorKind::kInvalidArgument,
                  "decode_split", "top_k = 33");
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
  TC_EXPECT_ERROR(ops::fused_moe_kernel_specs(S.args(), S.L.params(), bulk, 8), ErrorKind::kInvalidArgument,
                  "'bulk'", "sm_8x");
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
  TC_EXPECT_ERROR(ops::fused_moe_uses_decode(S.args(), S.L.params(), bad), ErrorKind::kInvalidArgument, "decode",
                  "2");
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
  for (const Layer& l : {Layer{4096, 128, 2048, 768, 8, {}}, Layer{4096, 256, 512, 256, 8, {}},
                         Layer{4096, 128, 2048, 768, 8, {{"sm90", 0}}}, Layer{1, 128, 2048, 768, 8, {}},
                         Layer{1, 8, 4096, 14336, 2, {}}, Layer{1, 256, 7168, 2048, 8, {}},
                         Layer{1, 256, 7168, 2048, 8, {{"decode_split", 2}}}}) {
    ops::FusedMoeParams p;
    p.top_k = l.top_k;
    const ops::FusedMoeOptions o = ops::fused_moe_options(l.config, "--config");
    for (const jit::KernelSpec& spec : sm90_specs(shape_only_layer(l.T, l.E, l.H, l.I), p, o)) {
      if (spec.function.find("grouped_gem") == std::string::npos && spec.function.find("decode_split") == std::string::npos)
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
  TC_EXPECT_ERROR(s.next(true, "fused_moe", Slots::kMaxBlockPairs), ErrorKind::kInvalidArgument, "fused_moe",
                  "stream", "while capturing");
}
