// The grouped GEMM without a GPU: its smoke cases on the CPU backend (golden
// + float64 check), the argument checks (each error names op, argument,
// expectation and what was given), the config choices and the kernels they
// compile for sm_90a.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <utility>

#include "moe_test_args.h"
#include "ops/moe/decode_split.h"
#include "ops/moe/launch_counters.h"
#include "ops/moe/tma_map_table.h"
#include "test_util.h"
#include "tilecraft/harness/random.h"
#include "tilecraft/jit/compiler.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/ops/fused_moe.h"
#include "tilecraft/ops/moe_fused_mapping.h"
#include "tilecraft/ops/moe_grouped_gemm.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

using namespace tilecraft;
using namespace tilecraft::test;

TEST(MoeGroupedGemmCpu, SmokeCases) {
  EXPECT_GT(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCPU), 40);
}

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
  EXPECT_EQ(spec.template_args[8], "true");   // TMA weights
  EXPECT_EQ(spec.template_args[9], "false");  // A gathered through a_index: cp.async
  EXPECT_EQ(spec.template_args[10], "true");  // TMA_C
  EXPECT_EQ(spec.template_args[11], "1");     // CLUSTER: one CTA per tile
  EXPECT_EQ(spec.template_args[12], "0");     // STAGGER
  EXPECT_EQ(spec.template_args[13], "true");  // LEAN_A, chosen
  EXPECT_EQ(spec.template_args[14], "true");  // LEAN_DESC, chosen
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
  // Past 64 experts by pointer the weights still come by TMA, their maps in
  // global memory: the kernel's table is the large one (its launch carries
  // two map pointers instead of the maps).
  over.tma = -1;
  const auto cg = ops::moe_grouped_gemm_config(g, over, 9);
  EXPECT_EQ(cg.tma, 1);
  const auto spec_g = ops::moe_grouped_gemm_kernel_spec(g, cg);
  EXPECT_EQ(spec_g.template_args[7], "512");  // TABLE
  EXPECT_EQ(spec_g.template_args[8], "true");  // TMA
  EXPECT_NE(spec_g.config.find("ptr-table512 global-maps"), std::string::npos) << spec_g.config;
  over.tma = 0;  // cp.async weights on request
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, over, 9).tma, 0);
  over.tma = 1, over.sm90 = 1;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "tma", "sm90=1");
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
  for (const Form f :
       {Form{true, true, false, 128, 1}, Form{false, false, false, 128, 1}, Form{false, true, true, 128, 0},
        Form{true, true, false, 64, 1}, Form{false, false, true, 64, 1}}) {
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
                       Form{false, false, 64, 1, 1, 0, 0, 1},
                       // cp.async weights (tma=0, on request): 128-row tiles, 128
                       // gated and 256 plain columns
                       Form{true, false, 128, 0, 1, 0, 1, 1}, Form{false, true, 128, 0, 1, 0, 1, 1}}) {
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
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, over, 9), ErrorKind::kInvalidArgument, "lean_desc", "warpgroups=2");
}

// Past 64 experts by pointer the warp-specialised kernel reads its weight
// maps from global memory (tma_map_table.h): gated and plain, [N, K] and
// [K, N], 64- and 128-row tiles, CTA pairs, A gathered or by TMA: each form
// compiles for sm_90a spill-free with its wgmma groups pipelined, as does
// the kernel that writes the maps (tensormap.replace, sm_90a).
TEST(MoeGroupedGemmCpu, GlobalTensorMapKernelsCompileWithoutSpills) {
  HostTensor a(DType::kBF16, {1024, 256}), out(DType::kBF16, {1024, 512}), idx(DType::kI32, {1024});
  HostTensor nk(DType::kBF16, {512, 256}), kn(DType::kBF16, {256, 512});
  struct Form {
    bool gated, kn;
    int block_m, tma, cluster;
  };
  for (const Form f : {Form{true, false, 128, 1, 1}, Form{false, true, 128, 1, 1}, Form{true, true, 64, 1, 1},
                       Form{true, false, 128, 1, 2}, Form{false, false, 128, 2, 1}}) {
    HostTensor tiles(DType::kI32, {1024 / f.block_m});
    ops::MoeGroupedGemmArgs g;
    g.a = a.view(), g.out = out.view(), g.tile_expert = tiles.view();
    if (f.tma != 2) g.a_index = idx.view();
    const ops::WeightLayout layout = f.kn ? ops::WeightLayout::kKN : ops::WeightLayout::kNK;
    g.w.layout = layout;
    for (int e = 0; e < 96; ++e) g.w.per_expert.push_back((f.kn ? kn : nk).view());
    if (f.gated) g.w_up = g.w;
    ops::MoeGroupedGemmConfig over;
    over.sm90 = 2, over.block_m = f.block_m, over.tma = f.tma, over.cluster = f.cluster;
    const auto c = ops::moe_grouped_gemm_config(g, over, 9);
    SCOPED_TRACE(c.str());
    const auto specs = ops::moe_grouped_gemm_kernel_specs(g, c);  // the maps' kernel, then the GEMM
    ASSERT_EQ(specs.size(), 2u);
    EXPECT_EQ(specs[0].function, "tc::moe::build_tma_maps_kernel");
    EXPECT_TRUE(specs[0].waits_for_previous_grid);
    const auto k = jit::compile(specs[0], {}, "sm_90a");
    EXPECT_EQ(k->resources.spill_store_bytes, 0);
    EXPECT_EQ(specs[1].template_args[7], "512");
    EXPECT_EQ(specs[1].template_args[8], "true");
    expect_ws_kernel_clean(specs[1]);
  }
  // Up to 64 experts by pointer the maps stay in the launch parameters.
  ops::MoeGroupedGemmArgs g;
  HostTensor tiles(DType::kI32, {8});
  g.a = a.view(), g.out = out.view(), g.tile_expert = tiles.view(), g.a_index = idx.view();
  for (int e = 0; e < 64; ++e) g.w.per_expert.push_back(nk.view());
  const auto specs = ops::moe_grouped_gemm_kernel_specs(g, ops::moe_grouped_gemm_config(g, {}, 9));
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].template_args[7], "64");
}

// The bookkeeping of the maps' slots (tma_map_table.h), with fake chunks:
// a key keeps its slot; slots never overlap; new chunks up to the limit,
// then one synchronisation frees what no capture used (forgotten keys get
// new slots); a captured slot and its chunk survive it; a capture that finds
// no room gets 0 and synchronises nothing.
TEST(MoeGroupedGemmCpu, MapSlotTableKeepsCapturedSlotsAndReclaimsTheRest) {
  using Table = ops::MapSlotTable;
  Table t;
  uint64_t next_base = 1 << 30;
  int syncs = 0;
  const auto new_chunk = [&] { return std::exchange(next_base, next_base + (uint64_t(1) << 30)); };
  const auto sync = [&] { ++syncs; };
  const size_t quarter = Table::kChunkBytes / 4;
  auto key = [](uint64_t stream, uint64_t set) { return std::vector<uint64_t>{stream, 0, 0, set}; };
  const uint64_t captured = t.slot(key(7, 0), quarter, true, new_chunk, sync);
  EXPECT_EQ(captured, uint64_t(1) << 30);
  std::set<uint64_t> seen{captured};
  for (uint64_t set = 1; set < 4 * Table::kMaxChunks; ++set) {  // every chunk full
    const uint64_t at = t.slot(key(1, set), quarter, false, new_chunk, sync);
    EXPECT_NE(at, 0u);
    EXPECT_TRUE(seen.insert(at).second) << "slot " << set << " overlaps another";
    EXPECT_EQ(t.slot(key(1, set), quarter, false, new_chunk, sync), at) << "a key keeps its slot";
  }
  EXPECT_EQ(t.chunks(), Table::kMaxChunks);
  EXPECT_EQ(syncs, 0);
  EXPECT_EQ(t.slot(key(2, 1), quarter, true, new_chunk, sync), 0u) << "a capture finds no room";
  EXPECT_EQ(syncs, 0);
  // Eager: one synchronisation, then the first chunk free of captures.
  const uint64_t after = t.slot(key(2, 1), quarter, false, new_chunk, sync);
  EXPECT_EQ(syncs, 1);
  EXPECT_EQ(after, (uint64_t(1) << 30) * 2) << "chunk 0 holds the captured slot and keeps its space";
  EXPECT_EQ(t.slot(key(7, 0), quarter, false, new_chunk, sync), captured) << "the captured slot survives";
  EXPECT_NE(t.slot(key(1, 5), quarter, false, new_chunk, sync), 0u);
  EXPECT_EQ(t.chunks(), Table::kMaxChunks);
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
// The combine fused into a plain projection: only on the warp-specialised
// kernel with A and stores by TMA and the dynamic tile scheduler. With the
// static walk a combine warp waiting for a tile of a CTA not yet resident
// holds the SM that CTA needs (a fuzz case at T=2814 stopped there).
TEST(MoeGroupedGemmCpu, FusedCombineNeedsTheDynamicScheduler) {
  HostTensor a(DType::kBF16, {1024, 256}), w(DType::kBF16, {2, 512, 256}), out(DType::kBF16, {1024, 512});
  HostTensor tiles(DType::kI32, {8}), idx(DType::kI32, {1024});
  ops::MoeGroupedGemmArgs g = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view());
  g.a_index.reset();  // the down projection reads its rows in layout order (A by TMA)
  ops::MoeGroupedGemmConfig over;
  over.sm90 = 2, over.tma = 2, over.tma_store = 1;
  const auto c = ops::moe_grouped_gemm_config(g, over, 9, 132);
  ASSERT_EQ(c.persistent, 2);
  EXPECT_EQ(ops::moe_grouped_gemm_combine_blocker(g, c, 4), "");
  for (int persistent : {0, 1}) {
    over.persistent = persistent;
    const std::string why = ops::moe_grouped_gemm_combine_blocker(g, ops::moe_grouped_gemm_config(g, over, 9, 132), 4);
    EXPECT_NE(why.find("persistent=" + std::to_string(persistent)), std::string::npos) << why;
    EXPECT_NE(why.find("persistent=2"), std::string::npos) << why;
  }
  over.persistent = 2, over.tma = 1;
  EXPECT_NE(ops::moe_grouped_gemm_combine_blocker(g, ops::moe_grouped_gemm_config(g, over, 9, 132), 4).find("TMA"),
            std::string::npos);
  over.tma = 2;
  EXPECT_NE(ops::moe_grouped_gemm_combine_blocker(g, ops::moe_grouped_gemm_config(g, over, 9, 132), 33).find("33 slots"),
            std::string::npos);
}

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
// weights takes them, stacked or by pointer (past 64 too); asked for
// cp.async weights (tma=0) the default falls back to the sm90=1 kernel, and
// forcing sm90=2 then names the limit.
TEST(MoeGroupedGemmCpu, HugeExpertsPickAKernelThatAddressesThem) {
  const int64_t N = 65536, K = 65536, rows = 1024;
  ops::MoeGroupedGemmArgs g = gathered_args(shape_only(DType::kBF16, {rows, K}), shape_only(DType::kBF16, {2, N, K}),
                                            shape_only(DType::kBF16, {rows, N}), shape_only(DType::kI32, {rows / 128}),
                                            shape_only(DType::kI32, {rows}));
  const ops::MoeGroupedGemmConfig over;
  auto c = ops::moe_grouped_gemm_config(g, over, 9);
  EXPECT_EQ(c.sm90, 2);
  EXPECT_EQ(c.tma, 1);
  g.w.stacked.reset();
  for (int e = 0; e < 65; ++e) g.w.per_expert.push_back(shape_only(DType::kBF16, {N, K}));
  c = ops::moe_grouped_gemm_config(g, over, 9);
  EXPECT_EQ(c.sm90, 2);
  EXPECT_EQ(c.tma, 1);
  ops::MoeGroupedGemmConfig cp;
  cp.tma = 0;
  EXPECT_EQ(ops::moe_grouped_gemm_config(g, cp, 9).sm90, 1);
  cp.sm90 = 2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, cp, 9), ErrorKind::kInvalidArgument, "sm90", "2^31");
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
    EXPECT_NO_THROW(jit::compile(
        {"moe/grouped_gemm.cuh", "tc::moe::grouped_gemm_split_reduce_kernel", {out_t, "16", "true", "false"}, "reduce"},
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
  EXPECT_EQ(run(16, 8, 16, pick).gemv, 1);       // 128 slots on 128 experts
  EXPECT_EQ(run(32, 8, 16, pick).gemv, 0);       // 256 slots: two rows per expert on average
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
  TC_EXPECT_ERROR(run(1, 8, 16, other_height), ErrorKind::kInvalidArgument, "block_m", "16 (the tile schedule's", "64");
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
      TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, cols, 9, 132), ErrorKind::kInvalidArgument, "bulk_cols", "1..32",
                      given.c_str());
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
    HostTensor a(DType::kBF16, {1, K}), w(DType::kBF16, {E, N, K}), out(DType::kBF16, {S, N}), ids(DType::kI32, {S}),
        scale(DType::kF32, {S});
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
  HostTensor x(DType::kBF16, {1, H}), wg(DType::kBF16, {E, I, H}), h(DType::kBF16, {S, I}), wd(DType::kBF16, {E, H, I}),
      out(DType::kBF16, {1, H}), ids(DType::kI32, {S}), scale(DType::kF32, {S});
  const auto gate_up = per_row_args(x.view(), wg.view(), h.view(), ids.view(), S, false, scale.view());
  const auto down = per_row_args(h.view(), wd.view(), out.view(), ids.view(), S, true, scale.view());
  const auto cu = ops::moe_grouped_gemm_config(gate_up, {}, 9, 132),
             cd = ops::moe_grouped_gemm_config(down, {}, 9, 132);
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
  for (const Case& k :
       {Case{2048, 7168, false, 132, 1}, Case{768, 2048, false, 132, 0}, Case{768, 2048, false, 16, 1},
        Case{1536, 4096, false, 132, 1}, Case{1024, 4096, false, 132, 1}, Case{1536, 2048, false, 132, 0},
        Case{1536, 4096, false, 512, 0}, Case{7168, 2048, true, 132, 0}, Case{2048, 7168, false, 8192, 0},
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
  TC_EXPECT_ERROR(ops::validate_moe_grouped_gemm(g, DeviceType::kCPU), ErrorKind::kInvalidArgument, "tile_fill", "256");
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
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, mma, 9, 132), ErrorKind::kInvalidArgument, "moe_grouped_gemm", "gemv",
                  "per-row schedule");
  ops::MoeGroupedGemmConfig wide;
  wide.block_n = 32;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(g, wide, 9, 132), ErrorKind::kInvalidArgument, "block_n", "8 or 16",
                  "32");
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
  HostTensor x(DType::kBF16, {T, K}), w(DType::kBF16, {E, N, K}), h(DType::kF32, {T * S, N}), ids(DType::kI32, {T * S}),
      scale(DType::kF32, {T * S}), y(DType::kF32, {T, N});
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
  y.fill_bytes(0xff);
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
  out.fill_bytes(0xff);  // NaN poison
  ops::moe_grouped_gemm_cpu(g);
  for (int64_t r = 0; r < M; ++r) {
    double row_abs = 0;
    for (int64_t n = 0; n < N; ++n) row_abs += std::fabs(out.ptr<float>()[r * N + n]);
    if (r < 3)
      EXPECT_GT(row_abs, 0.1) << "row " << r;
    else
      EXPECT_EQ(row_abs, 0.0) << "row " << r;
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
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(big, tma_a, 9, 132), ErrorKind::kInvalidArgument, "tma", "no row_token",
                  "a row_token");
}

// The mma.sync tile keeps its accumulators in registers: a split of warps
// that would give a thread 256 of them (kilobytes of spills) is refused,
// naming the keys; warps across N not given double until the tile fits,
// and that kernel compiles for sm_90a without spills.
TEST(MoeGroupedGemmCpu, MmaTilesKeepTheirAccumulatorsInRegisters) {
  HostTensor a(DType::kBF16, {1024, 256}), w(DType::kBF16, {2, 512, 256}), idx(DType::kI32, {1024}),
      out(DType::kBF16, {1024, 512}), tiles(DType::kI32, {8});
  const ops::MoeGroupedGemmArgs gated = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view(), true);
  const ops::MoeGroupedGemmArgs plain = gathered_args(a.view(), w.view(), out.view(), tiles.view(), idx.view());
  ops::MoeGroupedGemmConfig over;
  over.sm90 = 0, over.block_m = 128, over.block_n = 128, over.warps_m = 2, over.warps_n = 2;
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(gated, over, 9), ErrorKind::kInvalidArgument, "moe_grouped_gemm",
                  "'warps_m*warps_n'", "at most 128 fp32 accumulators", "got 256", "warps=2x2");
  EXPECT_NE(ops::moe_grouped_gemm_config(plain, over, 9).str().find("warps=2x2"), std::string::npos);  // 128
  over.warps_m = 1, over.warps_n = 0;  // N's warps chosen: 4 would give 256, so 8
  const auto c = ops::moe_grouped_gemm_config(gated, over, 9);
  EXPECT_NE(c.str().find("warps=1x8"), std::string::npos) << c.str();
  const auto k = jit::compile(ops::moe_grouped_gemm_kernel_spec(gated, c), {}, "sm_90a");
  EXPECT_EQ(k->resources.spill_store_bytes, 0) << c.str();
  over.warps_m = 0, over.block_n = 256;  // gated 128 x 256: 16 warps of 128 accumulators each
  TC_EXPECT_ERROR(ops::moe_grouped_gemm_config(gated, over, 9), ErrorKind::kInvalidArgument, "'block_m*block_n'",
                  "64 with more", "got 128", "warps=2x8");
  EXPECT_NE(ops::moe_grouped_gemm_config(plain, over, 9).str().find("warps=2x4"), std::string::npos);
}
