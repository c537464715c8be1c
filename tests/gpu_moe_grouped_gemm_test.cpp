// The grouped GEMM on the GPU: every smoke case against the golden (plus the
// float64 check), both kernels at every tile height, every CTA order and each
// kernel option (warp-specialised, persistent, CTA pairs, aligned groups,
// stagger, lean keys, fill stores, split K, the decode kernels, per-row
// schedules).
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "test_util.h"
#include "tilecraft/harness/random.h"
#include "tilecraft/harness/trace.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/ops/fused_moe.h"
#include "tilecraft/ops/moe_fused_mapping.h"
#include "tilecraft/runtime/device.h"

using namespace tilecraft;

TEST(GpuMoeGroupedGemm, SmokeCases) {
  TC_REQUIRE_GPU();
  EXPECT_GT(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA), 40);
}

// The kernel the heuristic does not pick for a shape must be right too.
TEST(GpuMoeGroupedGemm, BothKernelsAtEveryTileHeight) {
  TC_REQUIRE_GPU();
  // 64-row tiles through wgmma (opt-in), 128-row tiles through mma.sync.
  EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, "kn-stacked", {{"sm90", 1}}), 3);
  EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, "prefill-bm128", {{"sm90", 0}}), 3);
  EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, "prefill-bm128-kn", {{"sm90", 0}}),
            3);
}

// The plain 2-D grid and grouped CTA orders (a short last group included)
// cover every tile exactly once, on both kernels.
TEST(GpuMoeGroupedGemm, EveryCtaOrder) {
  TC_REQUIRE_GPU();
  for (int g : {0, 1, 3, 5}) {
    EXPECT_EQ(
        test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, "prefill-bm128", {{"group_m", g}}), 3);
    EXPECT_EQ(
        test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, "prefill-kn-tails", {{"group_m", g}}),
        3);
    EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, "prefill-bm128-kn",
                                               {{"sm90", 0}, {"group_m", g}}),
              3);
  }
}

// The warp-specialised wgmma kernel (opt-in: sm90=2): stacked [N, K] and
// [K, N], per-expert pointers, ragged N and K, 64- and 128-row tiles, output
// rows off 16 bytes. Weights by cp.async (tma=0) and by TMA tensor copies
// (tma=1), whose zero fill past N and K the tails cases exercise; tiles
// stored by TMA (the default where rows allow; the map clips the tails) and
// by the consumers (tma_store=0); A by TMA too (tma=2) where its rows are
// read in layout order.
TEST(GpuMoeGroupedGemm, WarpSpecialisedKernel) {
  TC_REQUIRE_GPU();
  for (auto [tma, store] : {std::pair{0, -1}, std::pair{1, -1}, std::pair{1, 0}})
    for (const char* w :
         {"prefill-bm128", "prefill-bm128-kn", "prefill-kn-tails", "kn-stacked", "prefill-nk", "race-layout-small",
          "nk-tails-bm128", "nk-rows-unaligned-bm128", "contiguous-a", "contiguous-a-kn-tails"})
      EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w,
                                                 {{"sm90", 2}, {"tma", tma}, {"tma_store", store}}),
                3)
          << w << " tma=" << tma << " tma_store=" << store;
  for (const char* w : {"contiguous-a", "contiguous-a-kn-tails"})
    EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w, {{"sm90", 2}, {"tma", 2}}), 3)
        << w << " tma=2";
}

// Persistent CTAs (one per SM, several tiles each, the ring's phases running
// on across tiles; tiles from a static walk or the dynamic counter) and one
// CTA per tile, in every CTA order (groups of 8 row tiles, one row tile at a
// time, the 2-D grid), A gathered
// (cp.async) and contiguous (TMA).
TEST(GpuMoeGroupedGemm, PersistentWarpSpecialisedKernel) {
  TC_REQUIRE_GPU();
  for (int persistent : {2, 1, 0})
    for (int g : {8, 1, 0})
      for (const char* w : {"many-tiles", "many-tiles-contiguous"})
        EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w,
                                                   {{"sm90", 2}, {"persistent", persistent}, {"group_m", g}}),
                  3)
            << w << " persistent=" << persistent << " group_m=" << g;
}

// CTA pairs (cluster=2: 2-CTA clusters over adjacent tiles, weights
// multicast where both tiles read the same ones) on every form of the
// warp-specialised kernel with TMA weights: stacked [N, K] and [K, N],
// per-expert pointers, tails, 64- and 128-row tiles, A gathered and by TMA,
// odd tile counts (a pair with one empty rank), tiles from the counter, a
// static walk and one pair per tile pair, in both CTA orders.
TEST(GpuMoeGroupedGemm, CtaPairs) {
  TC_REQUIRE_GPU();
  for (int mc : {1, 0})
    for (const char* w : {"prefill-bm128", "prefill-bm128-kn", "prefill-kn-tails", "kn-stacked", "prefill-nk",
                          "race-layout-small", "nk-tails-bm128", "nk-rows-unaligned-bm128", "contiguous-a",
                          "contiguous-a-kn-tails", "tall-tiles", "skewed-bm64"})
      EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w,
                                                 {{"sm90", 2}, {"cluster", 2}, {"multicast", mc}}),
                3)
          << w << " multicast=" << mc;
  // (Each many-tiles case costs seconds of CPU golden: PersistentWarpSpecialisedKernel
  // covers the other orders without pairs.)
  for (auto [persistent, g] : {std::pair{2, 3}, std::pair{1, 8}, std::pair{0, 0}})
    for (const char* w : {"many-tiles", "many-tiles-contiguous"})
      EXPECT_EQ(test::expect_manifest_cases_pass(
                    "moe_grouped_gemm", DeviceType::kCUDA, w,
                    {{"sm90", 2}, {"cluster", 2}, {"multicast", 1}, {"persistent", persistent}, {"group_m", g}}),
                3)
          << w << " persistent=" << persistent << " group_m=" << g;
}

// Past 64 experts by pointer the weights' TMA maps lie in global memory,
// rewritten before each launch: [N, K] on 128-row tiles, [K, N] on 64-row
// tiles (their schedules'), A gathered and by TMA (64-row tiles), CTA pairs,
// each launch against the golden, the three workloads one after another
// (their slots apart); and cp.async weights (tma=0) on the same cases.
TEST(GpuMoeGroupedGemm, GlobalTensorMaps) {
  TC_REQUIRE_GPU();
  for (const auto& cfg : std::vector<std::map<std::string, int>>{
           {}, {{"sm90", 2}, {"cluster", 2}, {"multicast", 1}}, {{"sm90", 2}, {"tma", 0}}})
    for (const char* w :
         {"many-experts-per-expert-ws", "many-experts-per-expert-ws-kn", "many-experts-per-expert-contiguous"}) {
      std::string name = w;
      for (const auto& [k, v] : cfg) name += " " + k + "=" + std::to_string(v);
      EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w, cfg), 3) << name;
    }
}

// Expert-aligned groups (group_align) against the golden on short experts
// (32 experts at 1-2 row tiles each, so boundaries move): the
// warp-specialised kernel (TMA weights) over the counter, the static walk
// and one CTA per tile, and CTA pairs.
TEST(GpuMoeGroupedGemm, AlignedGroups) {
  TC_REQUIRE_GPU();
  for (int persistent : {2, 1, 0})
    for (int cluster : {1, 2})
      EXPECT_EQ(
          test::expect_manifest_cases_pass(
              "moe_grouped_gemm", DeviceType::kCUDA, "short-experts",
              {{"sm90", 2}, {"persistent", persistent}, {"cluster", cluster}, {"group_m", 8}, {"group_align", 3}}),
          3)
          << "persistent=" << persistent << " cluster=" << cluster;
}

// Staggered consumer warpgroups (stagger=N: warpgroup 1 starts N k-steps
// behind warpgroup 0) against the golden: A gathered and by TMA, generic and
// tensor stores (two-pass tiles lose the held slot), tails, tiles with fewer
// k-steps than the lag (K = 64), many tiles per CTA from the counter and a
// static walk.
TEST(GpuMoeGroupedGemm, StaggeredConsumers) {
  TC_REQUIRE_GPU();
  for (int stagger : {1, 2, 3})
    for (auto [tma, store] : {std::pair{1, -1}, std::pair{2, -1}, std::pair{1, 0}})
      for (const char* w : {"prefill-bm128", "prefill-kn-tails", "race-layout-small", "nk-tails-bm128", "contiguous-a",
                            "contiguous-a-kn-tails", "skewed-bm64"}) {
        if (tma == 2 && std::string(w).rfind("contiguous-a", 0) != 0) continue;  // A by TMA: rows in layout order
        EXPECT_EQ(
            test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w,
                                             {{"sm90", 2}, {"tma", tma}, {"tma_store", store}, {"stagger", stagger}}),
            3)
            << w << " stagger=" << stagger << " tma=" << tma << " tma_store=" << store;
      }
  for (int persistent : {2, 1})
    for (const char* w : {"many-tiles", "many-tiles-contiguous"})
      EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w,
                                                 {{"sm90", 2}, {"persistent", persistent}, {"stagger", 3}}),
                3)
          << w << " persistent=" << persistent << " stagger=3";
}

// lean_a=1 (the producer's gathered A rows as addresses made once per tile,
// a K tail on the checked path) and lean_desc=1 (the consumers' MMA
// descriptors from stage 0's by adds; both the default since session 35),
// alone, together and neither (the A/B side), against the golden: weights by TMA and by cp.async, A by TMA, tails in K,
// [K, N] and [N, K], gated and plain, 64-row tiles, CTA pairs, many tiles per CTA.
TEST(GpuMoeGroupedGemm, LeanKeys) {
  TC_REQUIRE_GPU();
  for (auto [lean_a, lean_desc] : {std::pair{1, 0}, std::pair{0, 1}, std::pair{1, 1}, std::pair{0, 0}})
    for (int tma : {1, 0})
      for (const char* w : {"prefill-bm128", "prefill-bm128-kn", "prefill-kn-tails", "kn-stacked", "prefill-nk",
                            "race-layout-small", "nk-tails-bm128", "nk-rows-unaligned-bm128", "skewed-bm64"})
        EXPECT_EQ(
            test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w,
                                             {{"sm90", 2}, {"tma", tma}, {"lean_a", lean_a}, {"lean_desc", lean_desc}}),
            3)
            << w << " tma=" << tma << " lean_a=" << lean_a << " lean_desc=" << lean_desc;
  for (const char* w : {"contiguous-a", "contiguous-a-kn-tails"})  // A by TMA
    EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w,
                                               {{"sm90", 2}, {"tma", 2}, {"lean_desc", 1}}),
              3)
        << w << " tma=2 lean_desc=1";
  for (const char* w : {"prefill-kn-tails", "nk-tails-bm128", "skewed-bm64"})
    EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w,
                                               {{"sm90", 2}, {"cluster", 2}, {"lean_a", 1}, {"lean_desc", 1}}),
              3)
        << w << " cluster=2 lean_a=1 lean_desc=1";
  for (const char* w : {"many-tiles", "many-tiles-contiguous"})
    EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w,
                                               {{"sm90", 2}, {"lean_desc", 1}, {"stagger", 2}}),
              3)
        << w << " lean_desc=1 stagger=2";
  EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, "many-tiles",
                                             {{"sm90", 2}, {"lean_a", 1}, {"lean_desc", 1}}),
            3)
      << "many-tiles lean_a=1 lean_desc=1";
}

// fill_stores=1: rows tile_fill marks as padding are not stored. Against
// the same kernel with every row stored: the real rows' bits are the same,
// the padding rows keep the poison. Experts of 100, 17, 64 and 130 rows
// (tiles with a padding tail, a 64-row block of padding, whole blocks);
// gated with A gathered, plain with A by TMA (rows in layout order), 64-
// and 128-row tiles, half_skip, CTA pairs, tiles from the counter and one
// CTA per tile.
TEST(GpuMoeGroupedGemm, FillStoresLeavePaddingRows) {
  TC_REQUIRE_GPU();
  const std::vector<int> rows{100, 17, 64, 130};
  const int64_t T = 300, Kd = 256, N = 384, E = int64_t(rows.size());
  DeviceTensor w(DType::kBF16, {E, N, Kd}), wu(DType::kBF16, {E, N, Kd}), x(DType::kBF16, {T, Kd});
  harness::fill_uniform_device(w.view(), 31, 1, -0.5f, 0.5f, nullptr);
  harness::fill_uniform_device(wu.view(), 31, 2, -0.5f, 0.5f, nullptr);
  harness::fill_uniform_device(x.view(), 31, 3, -1.f, 1.f, nullptr);
  rt::Stream s;
  for (int bm : {64, 128}) {
    // The layout: each expert's rows first in its tiles, then padding (-1).
    std::vector<int32_t> fill, tiles;
    for (int64_t e = 0; e < E; ++e) {
      const int n = rows[size_t(e)], padded = (n + bm - 1) / bm * bm;
      for (int r = 0; r < padded; ++r) fill.push_back(r < n ? int32_t((e * 37 + r * 11) % T) : -1);
      for (int t = 0; t < padded / bm; ++t) tiles.push_back(int32_t(e));
    }
    const int64_t M = int64_t(fill.size());
    HostTensor fill_h(DType::kI32, {M}), tiles_h(DType::kI32, {int64_t(tiles.size())});
    std::memcpy(fill_h.data(), fill.data(), fill.size() * 4);
    std::memcpy(tiles_h.data(), tiles.data(), tiles.size() * 4);
    DeviceTensor fill_d = DeviceTensor::from_host(fill_h), tiles_d = DeviceTensor::from_host(tiles_h);
    DeviceTensor a_rows(DType::kBF16, {M, Kd});  // A in layout order (the down projection's form)
    harness::fill_uniform_device(a_rows.view(), 31, 4, -1.f, 1.f, nullptr);
    for (bool gated : {true, false})
      for (auto [cluster, persistent, skip] : {std::array{1, 2, 0}, std::array{1, 0, 1}, std::array{2, 2, 1}}) {
        DeviceTensor out(DType::kBF16, {M, N});
        ops::MoeGroupedGemmArgs g;
        g.w.stacked = w.view();
        if (gated) {
          g.a = x.view();
          g.a_index = fill_d.view();
          g.w_up = ops::ExpertWeights{wu.view(), {}, ops::WeightLayout::kNK};
        } else {
          g.a = a_rows.view();
        }
        g.out = out.view();
        g.tile_expert = tiles_d.view();
        g.tile_fill = fill_d.view();
        ops::MoeGroupedGemmOptions o;
        o.config.sm90 = 2, o.config.block_m = bm, o.config.cluster = cluster;
        o.config.persistent = persistent, o.config.half_skip = bm == 128 ? skip : 0;
        const std::string what = fmt::format("bm={} gated={} cluster={} persistent={} half_skip={}", bm, gated, cluster,
                                             persistent, o.config.half_skip);
        o.config.fill_stores = 0;
        out.fill_bytes(0xff);
        ops::moe_grouped_gemm(g, s.get(), o);
        s.sync();
        const HostTensor want = out.to_host();
        o.config.fill_stores = 1;
        EXPECT_NE(ops::moe_grouped_gemm_config(g, o.config, 9).str().find("fill-stores"), std::string::npos) << what;
        for (int rep = 0; rep < 2; ++rep) {
          out.fill_bytes(0xa5);
          ops::moe_grouped_gemm(g, s.get(), o);
          s.sync();
          const HostTensor got = out.to_host();
          int64_t bad_real = 0, bad_pad = 0, real = 0;
          const size_t row_bytes = size_t(N) * 2;
          for (int64_t r = 0; r < M; ++r) {
            const auto* gr = static_cast<const unsigned char*>(got.data()) + size_t(r) * row_bytes;
            const auto* wr = static_cast<const unsigned char*>(want.data()) + size_t(r) * row_bytes;
            if (fill[size_t(r)] >= 0) {
              ++real;
              bad_real += std::memcmp(gr, wr, row_bytes) != 0;
            } else {
              for (size_t b = 0; b < row_bytes; ++b) bad_pad += gr[b] != 0xa5;
            }
          }
          EXPECT_EQ(real, 100 + 17 + 64 + 130) << what;
          EXPECT_EQ(bad_real, 0) << what << ": real rows whose bits differ from every row stored, rep " << rep;
          EXPECT_EQ(bad_pad, 0) << what << ": padding bytes written, rep " << rep;
        }
      }
  }
}

// Split K on the mma.sync kernel: whole and ragged K slices, both layouts,
// per-expert pointer tables (64 and 512 entries), scalar loads, empty experts.
TEST(GpuMoeGroupedGemm, SplitK) {
  TC_REQUIRE_GPU();
  for (int splits : {2, 3, 7})
    for (const char* w : {"decode-t1", "small-uniform", "odd-shapes", "odd-shapes-kn", "empty-experts",
                          "many-experts-per-expert", "race-layout-small"})
      EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w,
                                                 {{"sm90", 0}, {"k_splits", splits}}),
                3)
          << w << " k_splits=" << splits;
}

// The decode kernel (gemv=1; the default only at about one row per expert):
// 16- and 32-row schedules, tiles with 1 to 32 real rows (passes of 4, 2
// and 1), N and K tails, fp16 and bf16, empty experts, no tokens.
TEST(GpuMoeGroupedGemm, GemvKernel) {
  TC_REQUIRE_GPU();
  for (const char* w : {"small-uniform", "empty-experts", "zero-tokens"})
    EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w, {{"gemv", 1}}), 3) << w;
  for (const char* w : {"decode-t1", "decode-t4-fp16", "skewed-bm32", "k-tail", "contiguous-a-row-token"}) {
    SCOPED_TRACE(w);
    EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w, {{"gemv", 1}}), 3);
    // Narrow items (half the columns): gated 16, plain 32.
    EXPECT_EQ(test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w, {{"gemv", 1}, {"block_n", 16}},
                                               "SiluUp"),
              1);
    for (const char* v : {"Plain", "RowScaleF32"})
      EXPECT_EQ(
          test::expect_manifest_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, w, {{"gemv", 1}, {"block_n", 32}}, v),
          1);
  }
}

// Without a tile schedule (one expert) the decode kernel computes every row
// of M, a last partial tile included (it counted M / block_m tiles, rounded
// down, before session 12: 20 rows on 32-row tiles computed none).
TEST(GpuMoeGroupedGemm, GemvWithoutScheduleCoversEveryRow) {
  TC_REQUIRE_GPU();
  for (const auto& [M, block_m] : {std::pair<int64_t, int>{20, 0}, {40, 16}, {33, 32}}) {
    SCOPED_TRACE("M = " + std::to_string(M) + ", block_m " + std::to_string(block_m));
    const int64_t K = 72, N = 40;
    HostTensor a(DType::kBF16, {M, K}), w(DType::kBF16, {1, N, K}), want(DType::kF32, {M, N});
    harness::fill_uniform(a.view(), 12, 1, -1.f, 1.f);
    harness::fill_uniform(w.view(), 12, 2, -1.f, 1.f);
    ops::MoeGroupedGemmArgs h;
    h.a = a.view();
    h.w.stacked = w.view();
    h.out = want.view();
    ops::moe_grouped_gemm_cpu(h);
    DeviceTensor da = DeviceTensor::from_host(a), dw = DeviceTensor::from_host(w), dout(DType::kF32, {M, N});
    dout.fill_bytes(0xff);  // NaN poison
    ops::MoeGroupedGemmArgs g = h;
    g.a = da.view(), g.w.stacked = dw.view(), g.out = dout.view();
    ops::MoeGroupedGemmOptions o;
    o.config.gemv = 1;
    o.config.block_m = block_m;
    rt::Stream s;
    ops::moe_grouped_gemm(g, s.get(), o);
    s.sync();
    const HostTensor got = dout.to_host();
    for (int64_t i = 0; i < M * N; ++i) {
      const float x = got.ptr<float>()[i], y = want.ptr<float>()[i];
      ASSERT_NEAR(x, y, 1e-3f * (1.f + std::fabs(y))) << "row " << i / N << ", column " << i % N;
    }
  }
}

// The decode path's two launches on per-row schedules (tile_expert = the
// routing ids), against the CPU golden: gate/up with a_repeat (gated, both
// widths) and down + combine (every width, row scales, bf16/fp16/fp32 out,
// settled or not, with and without the L2 prefetch); stacked and per-expert weights; N
// tails; K of 9 and 129 chunks (fewer and more than a warp's lanes); slots
// dropped (-1) or naming an expert past E add nothing. Each under balance 2
// (even column ranges, which here cross rows; these shapes are under one
// wave, where balance 1 does nothing) and 0 (one CTA per item): bitwise the
// same. Then the bulk kernels (sm_90: weights through a shared-memory ring;
// bulk=1): against the golden, and bitwise the same over two launches,
// with the default pieces and with 1 and 3 columns per piece (bulk_cols:
// other stage sizes and counts). The larger shapes: more items than CTAs at
// once (N = 4104), and K = 7168 (one 28 KB gate/up column per stage).
TEST(GpuMoeGroupedGemm, PerRowSchedules) {
  TC_REQUIRE_GPU();
  const std::vector<int> bulks = rt::device_info(0).cc_major >= 9 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0};
  // bulks: 0 register loads; 1, 2, 3 the bulk kernel with bulk_cols 0
  // (choose), 1 and 3.
  const auto cols_of = [](int bulk) { return bulk == 2 ? 1 : bulk == 3 ? 3 : 0; };
  // Whether bulk=1 takes these arguments (a column within half the ring);
  // the default picks it only from 1 MB of weights per SM, past these shapes.
  const auto bulk_fits = [&](const ops::MoeGroupedGemmArgs& g, int bulk) {
    ops::MoeGroupedGemmConfig on;
    on.bulk = 1, on.bulk_cols = cols_of(bulk);
    try {
      return ops::moe_grouped_gemm_config(g, on, 9, 132).bulk == 1;
    } catch (const Error&) {
      return false;
    }
  };
  struct Dims {
    int64_t T, S, N, K, E;
    DType dt;
    bool per_expert;
  };
  for (const Dims& sh : {Dims{1, 8, 200, 72, 16, DType::kBF16, false}, Dims{3, 4, 136, 1032, 9, DType::kF16, true},
                         Dims{2, 2, 64, 256, 3, DType::kBF16, false}, Dims{2, 8, 4104, 64, 16, DType::kBF16, false},
                         Dims{2, 4, 96, 7168, 8, DType::kF16, false}}) {
    const auto [T, S, N, K, E, dt, per_expert] = sh;
    SCOPED_TRACE(::testing::Message() << "T=" << T << " S=" << S << " N=" << N << " K=" << K << " E=" << E);
    HostTensor x(dt, {T, K}), w(dt, {E, N, K}), wu(dt, {E, N, K}), ids(DType::kI32, {T * S}),
        scale(DType::kF32, {T * S}), hs(dt, {T * S, K});
    harness::fill_uniform(x.view(), 31, 1, -1.f, 1.f);
    harness::fill_uniform(w.view(), 31, 2, -0.5f, 0.5f);
    harness::fill_uniform(wu.view(), 31, 3, -0.5f, 0.5f);
    harness::fill_uniform(scale.view(), 31, 4, 0.1f, 1.f);
    harness::fill_uniform(hs.view(), 31, 5, -1.f, 1.f);
    for (int64_t r = 0; r < T * S; ++r)  // every 5th slot dropped, every 7th past E
      ids.ptr<int32_t>()[r] = r % 5 == 3 ? -1 : r % 7 == 5 ? int32_t(E) : int32_t((r * 11 + 2) % E);
    DeviceTensor dx = DeviceTensor::from_host(x), dw = DeviceTensor::from_host(w), dwu = DeviceTensor::from_host(wu),
                 dids = DeviceTensor::from_host(ids), dscale = DeviceTensor::from_host(scale),
                 dhs = DeviceTensor::from_host(hs);
    auto experts = [&](const HostTensor& h, const DeviceTensor& d, bool host) {
      ops::ExpertWeights ew;
      if (!per_expert) {
        ew.stacked = host ? h.view() : d.view();
        return ew;
      }
      for (int64_t e = 0; e < E; ++e) {
        TensorView t = host ? h.view() : d.view();
        t.data = static_cast<char*>(t.data) + e * N * K * 2;
        t.shape = Shape{N, K}, t.strides = Shape{K, 1};
        ew.per_expert.push_back(t);
      }
      return ew;
    };
    auto near = [](const HostTensor& got, const HostTensor& want, const std::string& what) {
      double ss = 0;
      const size_t n = size_t(want.numel());
      for (size_t i = 0; i < n; ++i) ss += std::pow(load_as_double(want.data(), want.dtype(), i), 2);
      const double rms = std::sqrt(ss / double(n)), tol = want.dtype() == DType::kF32 ? 1e-4 : 1e-2;
      for (size_t i = 0; i < n; ++i) {
        const double g = load_as_double(got.data(), got.dtype(), i), y = load_as_double(want.data(), want.dtype(), i);
        ASSERT_LE(std::fabs(g - y), tol * (rms + std::fabs(y)))
            << what << ", element " << i << ": " << g << " vs " << y;
      }
    };
    rt::Stream s;
    // Gate/up: a_repeat = S; rows with no expert are not written (compared
    // only where the expert is live).
    HostTensor balanced;  // balance 2's result, for the bitwise check under 0
    // The launch of `g` into `out` (poisoned first), as the device returns it.
    auto launch = [&](ops::MoeGroupedGemmArgs g, DeviceTensor& out, const ops::MoeGroupedGemmOptions& o) {
      out.fill_bytes(0xff);
      g.out = out.view();
      ops::moe_grouped_gemm(g, s.get(), o);
      s.sync();
      return out.to_host();
    };
    for (int bulk : bulks)
      for (int bn : bulk ? std::vector<int>{32} : std::vector<int>{32, 16})
        for (int balance : bulk ? std::vector<int>{2} : std::vector<int>{2, 0}) {
          HostTensor want(dt, {T * S, N});
          want.fill_bytes(0);  // rows without an expert are not written
          ops::MoeGroupedGemmArgs g;
          g.a = x.view(), g.w = experts(w, dw, true), g.w_up = experts(wu, dwu, true), g.out = want.view();
          g.tile_expert = ids.view(), g.a_repeat = S;
          ops::moe_grouped_gemm_cpu(g);
          DeviceTensor dout(dt, {T * S, N});
          g.a = dx.view(), g.w = experts(w, dw, false), g.w_up = experts(wu, dwu, false);
          g.tile_expert = dids.view();
          ops::MoeGroupedGemmOptions o;
          o.config.block_n = bn;
          o.config.balance = balance;
          o.config.bulk = bulk ? 1 : 0, o.config.bulk_cols = cols_of(bulk);
          if (bulk && !bulk_fits(g, bulk)) continue;
          HostTensor got = launch(g, dout, o);
          for (int64_t r = 0; r < T * S; ++r)
            if (ids.ptr<int32_t>()[r] < 0 || ids.ptr<int32_t>()[r] >= E)  // not written: take the golden's zeros
              std::memcpy(got.ptr<uint16_t>() + r * N, want.ptr<uint16_t>() + r * N, size_t(N) * 2);
          const std::string what = fmt::format("gate/up block_n {} balance {} bulk {} bulk_cols {}", bn, balance,
                                               bulk ? 1 : 0, cols_of(bulk));
          near(got, want, what);
          if (bulk) {
            HostTensor again = launch(g, dout, o);
            for (int64_t r = 0; r < T * S; ++r) {
              if (ids.ptr<int32_t>()[r] < 0 || ids.ptr<int32_t>()[r] >= E) continue;
              EXPECT_EQ(std::memcmp(got.ptr<uint16_t>() + r * N, again.ptr<uint16_t>() + r * N, size_t(N) * 2), 0)
                  << what << ", row " << r << ": a second launch";
            }
          } else if (balance == 2) {
            balanced = std::move(got);
          } else {
            EXPECT_EQ(std::memcmp(got.data(), balanced.data(), got.nbytes()), 0) << what;
          }
        }
    // Down + combine: A = hs [T S, K], out [T, N].
    for (int bulk : bulks)
      for (DType out_dt : {dt, DType::kF32})
        for (int bn : bulk ? std::vector<int>{16} : std::vector<int>{8, 16})
          for (int mode : {0, 1, 2})  // not settled; settled (slots read early); settled + L2 prefetch
            for (int balance : bulk ? std::vector<int>{2} : std::vector<int>{2, 0}) {
              const bool settled = mode > 0;
              HostTensor want(out_dt, {T, N});
              ops::MoeGroupedGemmArgs g;
              g.a = hs.view(), g.w = experts(w, dw, true), g.out = want.view();
              g.tile_expert = ids.view(), g.row_scale = scale.view(), g.combine = S;
              ops::moe_grouped_gemm_cpu(g);
              DeviceTensor dout(out_dt, {T, N});
              g.a = dhs.view(), g.w = experts(w, dw, false);
              g.tile_expert = dids.view(), g.row_scale = dscale.view(), g.schedule_settled = settled;
              ops::MoeGroupedGemmOptions o;
              o.config.block_n = bn;
              o.config.prefetch = mode == 2 ? 1 : 0;
              o.config.balance = balance;
              o.config.bulk = bulk ? 1 : 0, o.config.bulk_cols = cols_of(bulk);
              if (bulk && !bulk_fits(g, bulk)) continue;
              HostTensor got = launch(g, dout, o);
              const std::string what = fmt::format("combine block_n {} out {} mode {} balance {} bulk {} bulk_cols {}",
                                                   bn, dtype_name(out_dt), mode, balance, bulk ? 1 : 0, cols_of(bulk));
              near(got, want, what);
              if (bulk) {
                EXPECT_EQ(std::memcmp(got.data(), launch(g, dout, o).data(), got.nbytes()), 0) << what << ": again";
              } else if (balance == 2) {
                balanced = std::move(got);
              } else {
                EXPECT_EQ(std::memcmp(got.data(), balanced.data(), got.nbytes()), 0) << what;
              }
            }
  }
}
