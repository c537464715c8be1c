// The fused MoE layer on the GPU: every smoke case against the golden, and
// the layer's promises: deterministic bits, CUDA-graph capture, the same bits
// under each option and path (dependent launch, half skip, fill stores, CTA
// pairs, aligned groups, the fused combine, the decode paths); the fused
// gate + mapping kernel and the trace stamps.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "moe_test_args.h"
#include "test_util.h"
#include "tilecraft/harness/random.h"
#include "tilecraft/harness/trace.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/ops/fused_moe.h"
#include "tilecraft/ops/moe_fused_mapping.h"
#include "tilecraft/runtime/device.h"

using namespace tilecraft;
using tilecraft::test::stacked_layer_args;

TEST(GpuFusedMoe, SmokeCases) {
  TC_REQUIRE_GPU();
  EXPECT_GT(test::expect_manifest_cases_pass("fused_moe", DeviceType::kCUDA), 8);
}

namespace {
// A DeepSeek-shaped layer, scaled down, on the device.
struct Layer {
  int64_t T = 200, H = 512, I = 256, E = 32, K = 4;
  DeviceTensor x, wr, wg, wu, wd, bias, out, ids, w;
  Layer() : Layer(200, 32, 4, 99) {}
  // x_stream picks the input (and so the routing); the weights are fixed.
  Layer(int64_t tokens, int64_t experts, int64_t top_k, uint64_t x_stream, int64_t inter = 256)
      : T(tokens), I(inter), E(experts), K(top_k) {
    const DType dt = DType::kBF16;
    x = DeviceTensor(dt, {T, H});
    wr = DeviceTensor(dt, {E, H});
    wg = DeviceTensor(dt, {E, I, H});
    wu = DeviceTensor(dt, {E, I, H});
    wd = DeviceTensor(dt, {E, H, I});
    bias = DeviceTensor(DType::kF32, {E});
    out = DeviceTensor(dt, {T, H});
    ids = DeviceTensor(DType::kI32, {T, K});
    w = DeviceTensor(DType::kF32, {T, K});
    uint64_t stream = 1;
    for (DeviceTensor* t : {&x, &wr, &wg, &wu, &wd, &bias})
      harness::fill_uniform_device(t->view(), 777, stream++, -0.2f, 0.2f, nullptr);
    harness::fill_uniform_device(x.view(), 777, x_stream, -1.f, 1.f, nullptr);
    TC_CU(rt::driver().cuCtxSynchronize());
  }
  ops::FusedMoeArgs args() {
    ops::FusedMoeArgs a = stacked_layer_args(x.view(), wr.view(), wg.view(), wu.view(), wd.view(), out.view());
    a.bias = bias.view();
    a.ids = ids.view();
    a.weights = w.view();
    return a;
  }
  ops::FusedMoeParams params() const {
    ops::FusedMoeParams p;
    p.top_k = int(K);
    p.gate.mode = ops::GateMode::kSigmoidGroupedTopk;
    p.gate.renormalize = true;
    p.gate.n_group = 8;
    p.gate.topk_group = 4;
    p.gate.scale = 2.5f;
    return p;
  }
};

bool same_bits(const HostTensor& a, const HostTensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Captures one layer call (options o; params prm, or the layer's own; args,
// or the layer's own, writing L.out) on s into a CUDA graph, checks that
// capturing did not run it, then replays it `replays` times, each onto a
// poisoned output, expecting the bits `want`.
void expect_graph_replays_bits(Layer& L, rt::Stream& s, ops::FusedMoeWorkspace& ws, const ops::FusedMoeOptions& o,
                               const HostTensor& want, int replays, const ops::FusedMoeParams* prm = nullptr,
                               const ops::FusedMoeArgs* args = nullptr) {
  L.out.fill_bytes(0xff);
  const auto& d = rt::driver();
  TC_CU(d.cuStreamBeginCapture(s.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  ops::fused_moe(args ? *args : L.args(), prm ? *prm : L.params(), s.get(), &ws, o);
  CUgraph g;
  TC_CU(d.cuStreamEndCapture(s.get(), &g));
  CUgraphExec ge;
  TC_CU(d.cuGraphInstantiate(&ge, g, 0));
  EXPECT_FALSE(same_bits(want, L.out.to_host())) << "capture must not have executed the layer";
  for (int i = 0; i < replays; ++i) {
    L.out.fill_bytes(0xff);
    TC_CU(d.cuGraphLaunch(ge, s.get()));
    s.sync();
    EXPECT_TRUE(same_bits(want, L.out.to_host())) << "graph replay " << i;
  }
  d.cuGraphExecDestroy(ge);
  d.cuGraphDestroy(g);
}

// sqrt(sum (got - want)^2 / sum want^2) over every element; want must not be
// all zeros (a comparison against zeros could not fail).
double relative_rms(const HostTensor& want, const HostTensor& got) {
  double ss = 0, err = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double y = load_as_double(want.data(), want.dtype(), size_t(i));
    const double g = load_as_double(got.data(), got.dtype(), size_t(i));
    ss += y * y, err += (g - y) * (g - y);
  }
  EXPECT_GT(ss, 0.0) << "the reference is all zeros";
  return std::sqrt(err / ss);
}
}  // namespace

TEST(GpuFusedMoe, DeterministicBits) {
  TC_REQUIRE_GPU();
  Layer L;
  rt::Stream s;
  ops::FusedMoeWorkspace ws;
  ops::fused_moe(L.args(), L.params(), s.get(), &ws);
  s.sync();
  const HostTensor first = L.out.to_host();
  for (int i = 0; i < 3; ++i) {
    L.out.fill_bytes(0xff);
    ops::fused_moe(L.args(), L.params(), s.get(), i == 1 ? nullptr : &ws);  // scratch or workspace: same bits
    s.sync();
    EXPECT_TRUE(same_bits(first, L.out.to_host())) << "run " << i;
  }
}

TEST(GpuFusedMoe, CudaGraphCaptureAndReplay) {
  TC_REQUIRE_GPU();
  Layer L;
  rt::Stream s;
  ops::FusedMoeWorkspace ws;
  ops::fused_moe(L.args(), L.params(), s.get(), &ws);  // compiles, loads, sizes the workspace
  s.sync();
  expect_graph_replays_bits(L, s, ws, {}, L.out.to_host(), 2);
}

// Programmatic dependent launch lets each kernel of the chain start while
// the previous one drains; every kernel waits for its predecessor before it
// touches memory. Back-to-back layers on different inputs sharing one
// workspace (no sync between them) must give the bits of plain launches: a
// kernel reading before its wait, or writing the workspace while the last
// call's combine still reads it, would show here. Decode (mma.sync, fused
// gate + mapping) and prefill (wgmma, 512 rows per expert) shapes.
TEST(GpuFusedMoe, DependentLaunchKeepsEveryCallsBits) {
  TC_REQUIRE_GPU();
  struct Restore {
    ~Restore() { jit::set_dependent_launch(true); }
  } restore;
  struct Shape {
    int64_t T, E, K;
  };
  for (const Shape& sh : {Shape{200, 32, 4}, Shape{1, 32, 4}, Shape{2048, 8, 2}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << sh.T << " E=" << sh.E << " K=" << sh.K);
    Layer A(sh.T, sh.E, sh.K, 99), B(sh.T, sh.E, sh.K, 123);
    rt::Stream s;
    ops::FusedMoeWorkspace ws;
    jit::set_dependent_launch(false);
    ops::fused_moe(A.args(), A.params(), s.get(), &ws);
    s.sync();
    const HostTensor ref_a = A.out.to_host();
    ops::fused_moe(B.args(), B.params(), s.get(), &ws);
    s.sync();
    const HostTensor ref_b = B.out.to_host();
    ASSERT_FALSE(same_bits(ref_a, ref_b)) << "the two inputs must differ for the check to mean anything";
    jit::set_dependent_launch(true);
    for (int rep = 0; rep < 3; ++rep) {
      A.out.fill_bytes(0xff), B.out.fill_bytes(0xff);
      ops::fused_moe(A.args(), A.params(), s.get(), &ws);
      ops::fused_moe(B.args(), B.params(), s.get(), &ws);
      ops::fused_moe(A.args(), A.params(), s.get(), &ws);
      s.sync();
      EXPECT_TRUE(same_bits(ref_a, A.out.to_host())) << "A, rep " << rep;
      EXPECT_TRUE(same_bits(ref_b, B.out.to_host())) << "B, rep " << rep;
    }
  }
}

// The warp-specialised kernel's consumer warpgroup skips the MMAs of a
// 64-row half with no rows (tile_fill = pos_to_token): the same bits as
// every half computing, at about 150 rows per expert (many experts' last
// 128-row tile holds at most 64 rows, which the test checks it has).
TEST(GpuFusedMoe, HalfSkipKeepsTheBits) {
  TC_REQUIRE_GPU();
  Layer L(600, 16, 4, 99);
  rt::Stream s;
  ops::FusedMoeWorkspace ws;
  ops::FusedMoeOptions skip, full;
  skip.gate_up.half_skip = skip.down.half_skip = 1;  // not chosen at 150 rows per expert
  full.gate_up.half_skip = full.down.half_skip = 0;
  ASSERT_EQ(ops::fused_moe_block_m(L.args(), L.params()), 128);
  ops::fused_moe(L.args(), L.params(), s.get(), &ws, full);
  s.sync();
  const HostTensor want = L.out.to_host(), ids = L.ids.to_host();
  std::vector<int> rows(size_t(L.E), 0);
  for (int64_t i = 0; i < L.T * L.K; ++i) ++rows[size_t(ids.ptr<int32_t>()[i])];
  int half_empty = 0;
  for (int r : rows) half_empty += r % 128 > 0 && r % 128 <= 64;
  ASSERT_GT(half_empty, 0) << "no expert's last tile has an empty half: the check would not run the skip";
  for (int rep = 0; rep < 2; ++rep) {
    L.out.fill_bytes(0xff);
    ops::fused_moe(L.args(), L.params(), s.get(), &ws, skip);
    s.sync();
    EXPECT_TRUE(same_bits(want, L.out.to_host())) << "rep " << rep << ", " << half_empty << " half-empty tiles";
  }
}

// Padding rows left unstored (fill_stores, chosen up to 1 row tile per
// expert) keep the layer's bits: against every row stored, eager twice and
// from a graph, on 64-row tiles (25 rows per expert), 128-row tiles with
// half-empty blocks (~150), and the default CTA pairs (256 experts at ~128).
TEST(GpuFusedMoe, FillStoresKeepTheBits) {
  TC_REQUIRE_GPU();
  struct Case {
    int64_t T, E, K;
    uint64_t seed;
  };
  for (const Case c : {Case{200, 32, 4, 96}, Case{600, 16, 4, 95}, Case{4096, 256, 8, 94}}) {
    Layer L(c.T, c.E, c.K, c.seed);
    rt::Stream s;
    ops::FusedMoeWorkspace ws;
    ops::FusedMoeOptions all, fill;
    all.gate_up.fill_stores = all.down.fill_stores = 0;
    fill.gate_up.fill_stores = fill.down.fill_stores = 1;
    ops::fused_moe(L.args(), L.params(), s.get(), &ws, all);
    s.sync();
    const HostTensor want = L.out.to_host();
    for (int rep = 0; rep < 2; ++rep) {
      L.out.fill_bytes(0xff);
      ops::fused_moe(L.args(), L.params(), s.get(), &ws, fill);
      s.sync();
      EXPECT_TRUE(same_bits(want, L.out.to_host())) << "T=" << c.T << " E=" << c.E << ", rep " << rep;
      L.out.fill_bytes(0xff);
      ops::fused_moe(L.args(), L.params(), s.get(), &ws, {});  // the default (fill on the first and last shapes)
      s.sync();
      EXPECT_TRUE(same_bits(want, L.out.to_host())) << "T=" << c.T << " E=" << c.E << " default, rep " << rep;
    }
    expect_graph_replays_bits(L, s, ws, fill, want, 2);
  }
}

// CTA pairs in the layer: both projections on 2-CTA clusters give the same
// bits as one CTA per tile (each tile's MMAs and epilogue are the same; only
// who loads the weights changes), over the counter, the static walk and one
// pair per tile pair, with half-skipped tiles.
TEST(GpuFusedMoe, CtaPairsKeepTheBits) {
  TC_REQUIRE_GPU();
  Layer L(600, 16, 4, 98);
  rt::Stream s;
  ops::FusedMoeWorkspace ws;
  ASSERT_EQ(ops::fused_moe_block_m(L.args(), L.params()), 128);
  ops::fused_moe(L.args(), L.params(), s.get(), &ws, {});
  s.sync();
  const HostTensor want = L.out.to_host();
  for (int persistent : {2, 1, 0})
    for (int skip : {0, 1})
      for (int mc : {0, 1}) {
        ops::FusedMoeOptions o;
        o.gate_up.cluster = o.down.cluster = 2;
        o.gate_up.multicast = o.down.multicast = mc;
        o.gate_up.persistent = o.down.persistent = persistent;
        o.gate_up.half_skip = o.down.half_skip = skip;
        L.out.fill_bytes(0xff);
        ops::fused_moe(L.args(), L.params(), s.get(), &ws, o);
        s.sync();
        EXPECT_TRUE(same_bits(want, L.out.to_host()))
            << "persistent " << persistent << ", half_skip " << skip << ", multicast " << mc;
      }
}

// The default CTA pairs (gate/up of 256 experts at about one 128-row tile
// each: DeepSeek-V3-like prefill, here with small H and I) keep the bits of
// one CTA per tile, eager and replayed from a CUDA graph (cluster launches
// captured with the rest of the chain).
TEST(GpuFusedMoe, DefaultPairsKeepTheBitsInAGraph) {
  TC_REQUIRE_GPU();
  Layer L(4096, 256, 8, 97);
  ASSERT_EQ(ops::fused_moe_block_m(L.args(), L.params()), 128);
  rt::Stream s;
  ops::FusedMoeWorkspace ws;
  ops::FusedMoeOptions one;
  one.gate_up.cluster = 1, one.gate_up.half_skip = 0;
  ops::fused_moe(L.args(), L.params(), s.get(), &ws, one);
  s.sync();
  const HostTensor want = L.out.to_host();
  L.out.fill_bytes(0xff);
  ops::fused_moe(L.args(), L.params(), s.get(), &ws);
  s.sync();
  EXPECT_TRUE(same_bits(want, L.out.to_host())) << "eager, pairs by default";
  expect_graph_replays_bits(L, s, ws, {}, want, 2);
}

namespace {
// One view per expert of a stacked [E, R, C] tensor: weights by pointer.
ops::ExpertWeights per_expert_views(const DeviceTensor& stacked) {
  ops::ExpertWeights ew;
  TensorView v = stacked.view();
  const int64_t E = v.shape[0], R = v.shape[1], C = v.shape[2];
  for (int64_t e = 0; e < E; ++e)
    ew.per_expert.emplace_back(static_cast<char*>(v.data) + e * R * C * int64_t(dtype_size(v.dtype)), v.dtype,
                               Shape{R, C}, v.device);
  return ew;
}
}  // namespace

// More experts by pointer than the launch parameters hold maps for (256
// here): the GEMMs' TMA maps lie in global memory, rewritten before each
// launch. The bits of the same weights stacked (the same tiles and MMAs;
// only where the maps come from differs), eager and from a CUDA graph; a
// second weight set (a copy) interleaved with the first on one stream
// without a sync (two slots, each rewritten before its own launches); and
// the cp.async weights (tma=0) the path took before.
TEST(GpuFusedMoe, PerExpertPointersPastTheParamsKeepTheBits) {
  TC_REQUIRE_GPU();
  Layer L(4096, 256, 8, 97);
  rt::Stream s;
  ops::FusedMoeWorkspace ws;
  ops::fused_moe(L.args(), L.params(), s.get(), &ws);
  s.sync();
  const HostTensor want = L.out.to_host();
  ops::FusedMoeArgs by_ptr = L.args();
  by_ptr.w_gate = per_expert_views(L.wg), by_ptr.w_up = per_expert_views(L.wu), by_ptr.w_down = per_expert_views(L.wd);
  L.out.fill_bytes(0xff);
  ops::fused_moe(by_ptr, L.params(), s.get(), &ws);
  s.sync();
  EXPECT_TRUE(same_bits(want, L.out.to_host())) << "per-expert pointers, eager";
  expect_graph_replays_bits(L, s, ws, {}, want, 2, nullptr, &by_ptr);

  // The copy through the host: the same bits at other addresses.
  DeviceTensor wg2 = DeviceTensor::from_host(L.wg.to_host()), wu2 = DeviceTensor::from_host(L.wu.to_host()),
               wd2 = DeviceTensor::from_host(L.wd.to_host()), out2(L.out.view().dtype, L.out.view().shape);
  ops::FusedMoeArgs copy = by_ptr;
  copy.w_gate = per_expert_views(wg2), copy.w_up = per_expert_views(wu2), copy.w_down = per_expert_views(wd2);
  copy.out = out2.view();
  for (int i = 0; i < 3; ++i) {
    L.out.fill_bytes(0xff), out2.fill_bytes(0xff);
    ops::fused_moe(by_ptr, L.params(), s.get(), &ws);
    ops::fused_moe(copy, L.params(), s.get(), &ws);
    s.sync();
    EXPECT_TRUE(same_bits(want, L.out.to_host())) << "first weight set, round " << i;
    EXPECT_TRUE(same_bits(want, out2.to_host())) << "second weight set, round " << i;
  }
  ops::FusedMoeOptions cp;
  cp.gate_up.tma = 0, cp.down.tma = 0;
  L.out.fill_bytes(0xff);
  ops::fused_moe(by_ptr, L.params(), s.get(), &ws, cp);
  s.sync();
  EXPECT_TRUE(same_bits(want, L.out.to_host())) << "per-expert pointers, cp.async weights";
}

// Expert-aligned groups (group_align) only reorder tiles: the layer's bits
// with groups of exactly 8, eager and from a graph, on DeepSeek-V3-like
// prefill (256 experts at ~1 row tile each, gate/up on the default CTA
// pairs) and on 32 experts at ~1-2 tiles, over the counter, the static walk
// and one CTA per tile.
TEST(GpuFusedMoe, AlignedGroupsKeepTheBits) {
  TC_REQUIRE_GPU();
  struct Case {
    int64_t T, E, K;
    uint64_t seed;
  };
  for (const Case c : {Case{4096, 256, 8, 93}, Case{1200, 32, 4, 92}}) {
    Layer L(c.T, c.E, c.K, c.seed);
    ASSERT_EQ(ops::fused_moe_block_m(L.args(), L.params()), 128);
    rt::Stream s;
    ops::FusedMoeWorkspace ws;
    ops::FusedMoeOptions fixed;
    fixed.gate_up.group_m = fixed.down.group_m = 8;
    fixed.gate_up.group_align = fixed.down.group_align = 0;
    ops::fused_moe(L.args(), L.params(), s.get(), &ws, fixed);
    s.sync();
    const HostTensor want = L.out.to_host();
    for (int persistent : {2, 1, 0}) {
      ops::FusedMoeOptions o = fixed;
      o.gate_up.group_align = o.down.group_align = 3;
      o.gate_up.persistent = o.down.persistent = persistent;
      L.out.fill_bytes(0xff);
      ops::fused_moe(L.args(), L.params(), s.get(), &ws, o);
      s.sync();
      EXPECT_TRUE(same_bits(want, L.out.to_host())) << "T=" << c.T << " E=" << c.E << " persistent " << persistent;
      if (persistent == 2) expect_graph_replays_bits(L, s, ws, o, want, 2);
    }
  }
}

// The combine fused into the down projection (fused_combine=1): the bits of
// moe_reduce_fused after it, eager (twice: the counters must be back at zero)
// and from a graph, on the race's layout (manifest race cases against the
// golden) and on layers with given routing where some tokens have no routed
// slot (zeros), some drop one slot, and one expert is hot, at 1, 2, 4 and 8
// slots per token and 64- and 128-row tiles.
TEST(GpuFusedMoe, FusedCombineKeepsTheBits) {
  TC_REQUIRE_GPU();
  if (rt::device_info(0).cc_major != 9) GTEST_SKIP() << "the fused combine runs in the sm_90 warp-specialised kernel";
  for (const char* w : {"race-functional-1", "race-functional-2"})
    EXPECT_EQ(test::expect_manifest_cases_pass("fused_moe", DeviceType::kCUDA, w, {{"fused_combine", 1}}), 1) << w;
  // Rows of N / 8 chunks that are not a multiple of a warp's (H = 664: 83,
  // H = 1232: 154): the combine warps' shuffles once hung on these (random
  // config draws, session 43-44), against the golden.
  EXPECT_EQ(test::expect_shape_cases_pass(
                "fused_moe", DeviceType::kCUDA,
                {"T=2814,H=664,I=648,E=55,K=1,dtype=fp16,weights=stacked,routing=uniform,mode=sigmoid_grouped_topk,"
                 "n_group=5,topk_group=2,scale=2.5,renormalize=true,config=fused_combine=1",
                 "T=86,H=1232,I=552,E=64,K=6,dtype=fp16,weights=per_expert,routing=router,renormalize=true,"
                 "config=mapping_blocks=1;fused_combine=1",
                 "T=1000,H=520,I=200,E=16,K=3,dtype=bf16,weights=stacked,routing=skewed,config=fused_combine=1"}),
            3);
  struct Shape {
    int64_t T, E, K;
  };
  for (const Shape& sh :
       {Shape{2048, 8, 2}, Shape{3000, 16, 4}, Shape{1500, 8, 1}, Shape{4096, 64, 8}, Shape{700, 32, 8}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << sh.T << " E=" << sh.E << " K=" << sh.K);
    Layer L(sh.T, sh.E, sh.K, 91);
    HostTensor ids(DType::kI32, {L.T, L.K}), wts(DType::kF32, {L.T, L.K});
    uint64_t r = 12345;
    auto next = [&r] { return r = r * 6364136223846793005ull + 1442695040888963407ull, uint32_t(r >> 33); };
    int64_t unrouted = 0, dropped = 0;
    for (int64_t t = 0; t < L.T; ++t)
      for (int64_t k = 0; k < L.K; ++k) {
        int32_t e = int32_t((t * L.K + k) % L.E);  // distinct within a token (K <= E)
        if (k == 0 && next() % 3 == 0)
          e = 0;  // expert 0 is hot
        else if (k > 0 && e == 0)
          e = int32_t(L.E - 1 - k);
        if (t % 7 == 3)
          e = -1;  // no routed slot: zeros
        else if (k == L.K - 1 && L.K > 1 && t % 5 == 1)
          e = int32_t(L.E), ++dropped;  // past the experts: dropped
        ids.ptr<int32_t>()[t * L.K + k] = e;
        wts.ptr<float>()[t * L.K + k] = 0.05f + float(next() % 1000) / 1000.f;
      }
    for (int64_t t = 0; t < L.T; ++t) unrouted += t % 7 == 3;
    L.ids.copy_from(ids), L.w.copy_from(wts);
    ops::FusedMoeParams prm = L.params();
    prm.given_routing = true;
    rt::Stream s;
    ops::FusedMoeWorkspace ws;
    ops::FusedMoeOptions two, fused;
    two.fused_combine = 0, fused.fused_combine = 1;
    L.out.fill_bytes(0xff);
    ops::fused_moe(L.args(), prm, s.get(), &ws, two);
    s.sync();
    const HostTensor want = L.out.to_host();
    double zeros = 0;
    for (int64_t i = 0; i < want.numel(); ++i) zeros += load_as_double(want.data(), want.dtype(), size_t(i)) == 0.0;
    ASSERT_GE(zeros, double(unrouted * L.H)) << "tokens without a routed slot must come out as zeros";
    ASSERT_LT(zeros, 0.5 * double(want.numel())) << "most tokens are routed: the check must compare real sums";
    for (int rep = 0; rep < 2; ++rep) {
      L.out.fill_bytes(0xff);
      ops::fused_moe(L.args(), prm, s.get(), rep ? nullptr : &ws, fused);
      s.sync();
      EXPECT_TRUE(same_bits(want, L.out.to_host())) << "eager rep " << rep << " (" << dropped << " dropped slots)";
    }
    expect_graph_replays_bits(L, s, ws, fused, want, 2, &prm);
  }
}

// The decode combine kernel's preload (its first item's weights bulk-copied
// into shared memory before the grid wait, sm_90): the bits of the register
// loads, with and without dropped slots, eager and from a graph; and a clear
// error where it cannot run.
TEST(GpuFusedMoe, DecodePreloadKeepsTheBits) {
  TC_REQUIRE_GPU();
  if (rt::device_info(0).cc_major != 9) GTEST_SKIP() << "the preload runs on sm_90 only";
  for (int64_t E : {128, 16}) {
    SCOPED_TRACE("E = " + std::to_string(E));
    Layer L(1, E, 8, 99, 768);  // Qwen3-30B-like down rows (I = 768): 8 slots x 8 columns x 1.5 KB per CTA
    ops::FusedMoeParams prm = L.params();
    if (E == 16) {  // given routing with two dropped slots
      HostTensor ids(DType::kI32, {1, 8}), wts(DType::kF32, {1, 8});
      for (int k = 0; k < 8; ++k) {
        ids.ptr<int32_t>()[k] = k == 2 ? -1 : k == 5 ? 16 : 2 * k + 1;
        wts.ptr<float>()[k] = 0.1f * float(k + 1);
      }
      L.ids.copy_from(ids), L.w.copy_from(wts);
      prm.given_routing = true;
    }
    rt::Stream s;
    ops::FusedMoeWorkspace ws;
    ops::FusedMoeOptions off, on;
    off.decode = on.decode = 1, off.decode_split = on.decode_split = 0;
    off.down.preload = 0, on.down.preload = 1;
    ops::fused_moe(L.args(), prm, s.get(), &ws, off);
    s.sync();
    const HostTensor want = L.out.to_host();
    for (int rep = 0; rep < 2; ++rep) {
      L.out.fill_bytes(0xff);
      ops::fused_moe(L.args(), prm, s.get(), &ws, on);
      s.sync();
      EXPECT_TRUE(same_bits(want, L.out.to_host())) << "rep " << rep;
    }
    if (E == 128) expect_graph_replays_bits(L, s, ws, on, want, 2);
  }
  Layer big(1, 32, 8, 99, 4096);  // 8 x 8 x 8 KB rows: past the limit
  ops::FusedMoeOptions o;
  o.decode = 1, o.decode_split = 0, o.down.preload = 1;  // (I = 4096 would take decode_split by default)
  rt::Stream s;
  TC_EXPECT_ERROR(ops::fused_moe(big.args(), big.params(), s.get(), nullptr, o), ErrorKind::kInvalidArgument, "preload",
                  "bytes per CTA");
  o.down.preload = -1;  // the default: no preload where it does not fit, and no error
  EXPECT_NO_THROW(ops::fused_moe(big.args(), big.params(), s.get(), nullptr, o));
  s.sync();
}

// The fused combine where it cannot run is an error that says why.
TEST(GpuFusedMoe, FusedCombineErrors) {
  TC_REQUIRE_GPU();
  Layer L(2048, 8, 2, 91);
  rt::Stream s;
  ops::FusedMoeOptions o;
  o.fused_combine = 1;
  o.down.tma = 1;  // A by cp.async: the producer warps are busy
  TC_EXPECT_ERROR(ops::fused_moe(L.args(), L.params(), s.get(), nullptr, o), ErrorKind::kInvalidArgument, "fused_moe",
                  "fused_combine", "TMA");
  o = {};
  o.fused_combine = 1;
  o.down.persistent = 0;  // the static walk: a waiting combine warp could hold a later tile's SM
  TC_EXPECT_ERROR(ops::fused_moe(L.args(), L.params(), s.get(), nullptr, o), ErrorKind::kInvalidArgument, "fused_moe",
                  "fused_combine", "persistent=0");
  o = {};
  o.fused_combine = 2;
  TC_EXPECT_ERROR(ops::fused_moe(L.args(), L.params(), s.get(), nullptr, o), ErrorKind::kInvalidArgument,
                  "fused_combine", "-1 (choose)", "2");
}

// The decode path against the golden (smoke cases at T = 1 and 2 take it
// by default; forced on the larger NK cases) and against the mapped path on
// the same inputs: within the bf16 tolerance (the decode path rounds each
// token's sum once, the mapped one each expert's output first), and bitwise
// the same over repeated calls, eager and from a CUDA graph.
TEST(GpuFusedMoe, DecodePath) {
  TC_REQUIRE_GPU();
  for (const char* w : {"decode-t1-grouped", "decode-t2-dropped", "t1-k1"}) {
    EXPECT_EQ(test::expect_manifest_cases_pass("fused_moe", DeviceType::kCUDA, w, {}), 1) << w;
    EXPECT_EQ(test::expect_manifest_cases_pass("fused_moe", DeviceType::kCUDA, w, {{"decode", 0}}), 1) << w;
    // The bulk kernels (sm_90), which the default takes only for gate/up
    // from 896 KiB of weights per SM, past these shapes: gate/up, and both
    // projections where down has a per-row schedule (K > 1: not t1-k1).
    if (rt::device_info(0).cc_major >= 9) {
      EXPECT_EQ(test::expect_manifest_cases_pass("fused_moe", DeviceType::kCUDA, w, {{"gate_up_bulk", 1}}), 1) << w;
      if (std::string(w) != "t1-k1") {
        EXPECT_EQ(test::expect_manifest_cases_pass("fused_moe", DeviceType::kCUDA, w, {{"bulk", 1}}), 1) << w;
      }
    }
  }
  for (const char* w : {"deepseek-like-small", "qwen-like-skewed", "empty-experts-small"})
    EXPECT_EQ(test::expect_manifest_cases_pass("fused_moe", DeviceType::kCUDA, w, {{"decode", 1}}), 1) << w;
  for (int64_t T : {1, 3}) {
    SCOPED_TRACE("T = " + std::to_string(T));
    Layer L(T, 32, 4, 99);
    rt::Stream s;
    ops::FusedMoeWorkspace ws;
    ops::FusedMoeOptions mapped, decode;
    mapped.decode = 0, decode.decode = 1;
    ops::fused_moe(L.args(), L.params(), s.get(), &ws, mapped);
    s.sync();
    const HostTensor want = L.out.to_host();
    L.out.fill_bytes(0xff);
    ops::fused_moe(L.args(), L.params(), s.get(), &ws, decode);
    s.sync();
    const HostTensor got = L.out.to_host();
    EXPECT_LE(relative_rms(want, got), 1e-2) << "relative RMS difference, decode vs mapped path";
    for (int i = 0; i < 2; ++i) {
      L.out.fill_bytes(0xff);
      ops::fused_moe(L.args(), L.params(), s.get(), i ? nullptr : &ws, decode);
      s.sync();
      EXPECT_TRUE(same_bits(got, L.out.to_host())) << "run " << i;
    }
    expect_graph_replays_bits(L, s, ws, decode, got, 1);
  }
}

// Stacked weights whose experts lie apart, on every path these shapes take:
// gate and up as views of one fused [E, 2I, H] tensor (w13[:, :I], w13[:, I:])
// and down as the first H rows of [E, H + 8, I] give the bits of contiguous
// copies: the decode path (T = 1 and 3; at T = 1 also both one-kernel
// splits, whose bulk copies and down map step by the strides), 64- and
// 128-row warp-specialised tiles (T = 200, 600) with TMA weight maps, and
// mma.sync (sm90 = 0); twice each onto a poisoned output, and from a graph.
TEST(GpuFusedMoe, StackedWeightsApartKeepTheBits) {
  TC_REQUIRE_GPU();
  for (const int64_t T : {1, 3, 200, 600}) {
    SCOPED_TRACE("T = " + std::to_string(T));
    Layer L(T, 32, 4, 80 + uint64_t(T));
    const DeviceTensor w13 = DeviceTensor::from_host(test::fuse_gate_up(L.wg.to_host(), L.wu.to_host()));
    const DeviceTensor wd_big = DeviceTensor::from_host(test::pad_expert_rows(L.wd.to_host(), 8));
    const auto [gate, up] = ops::gate_up_views(w13.view());
    ops::FusedMoeArgs views = L.args();
    views.w_gate.stacked = gate;
    views.w_up.stacked = up;
    views.w_down.stacked = test::first_rows_view(wd_big.view(), L.H);
    rt::Stream s;
    ops::FusedMoeWorkspace ws;
    ops::FusedMoeOptions mma, split, balanced;
    mma.gate_up.sm90 = mma.down.sm90 = 0;
    split.decode_split = 1, balanced.decode_split = 2;  // the one-kernel decode paths (sm_90, T = 1)
    const bool sm90 = rt::device_info(0).cc_major == 9;
    for (const ops::FusedMoeOptions& o : {ops::FusedMoeOptions{}, mma, split, balanced}) {
      if (T < 200 && o.gate_up.sm90 == 0) continue;  // (the decode path has no such key)
      if (o.decode_split > 0 && (T != 1 || !sm90)) continue;
      L.out.fill_bytes(0xff);
      ops::fused_moe(L.args(), L.params(), s.get(), &ws, o);
      s.sync();
      const HostTensor want = L.out.to_host();
      for (int rep = 0; rep < 2; ++rep) {
        L.out.fill_bytes(0xff);
        ops::fused_moe(views, L.params(), s.get(), &ws, o);
        s.sync();
        EXPECT_TRUE(same_bits(want, L.out.to_host())) << "sm90 " << o.gate_up.sm90 << ", rep " << rep;
      }
      expect_graph_replays_bits(L, s, ws, o, want, 1, nullptr, &views);
    }
  }
}

// The one-kernel decode path (decode_split=1, sm_90): the manifest's T = 1
// cases against the golden, and a layer (I = 336) against the two-kernel
// decode path (relative RMS) at its chosen slice width (48: 28 units) and
// at 112, 16 and 8 (row lanes 16 with 14 live, 2, 1), bitwise the same on
// every run, from a graph, at any box height and any balancing pool.
TEST(GpuFusedMoe, DecodeSplit) {
  TC_REQUIRE_GPU();
  if (rt::device_info(0).cc_major != 9) GTEST_SKIP() << "decode_split runs on sm_90 only";
  for (const char* w : {"t1-k1", "decode-t1-grouped", "decode-t1-h200"})
    EXPECT_EQ(test::expect_manifest_cases_pass("fused_moe", DeviceType::kCUDA, w, {{"decode_split", 1}}), 1) << w;
  Layer L(1, 32, 4, 99, 336);
  rt::Stream s;
  ops::FusedMoeWorkspace ws;
  ops::FusedMoeOptions two, one;
  two.decode = 1, two.decode_split = 0, one.decode = 1, one.decode_split = 1;
  ops::fused_moe(L.args(), L.params(), s.get(), &ws, two);
  s.sync();
  const HostTensor want = L.out.to_host();
  auto run = [&](const ops::FusedMoeOptions& o) {
    L.out.fill_bytes(0xff);
    ops::fused_moe(L.args(), L.params(), s.get(), &ws, o);
    s.sync();
    return L.out.to_host();
  };
  auto rms = [&](const HostTensor& got) { return relative_rms(want, got); };
  const HostTensor got = run(one);
  EXPECT_LE(rms(got), 1e-2) << "relative RMS difference, one kernel vs two";
  for (int cols : {112, 16, 8}) {
    ops::FusedMoeOptions w = one;
    w.decode_split_cols = cols;
    EXPECT_LE(rms(run(w)), 1e-2) << "decode_split_cols=" << cols;
  }
  for (int i = 0; i < 2; ++i) {
    L.out.fill_bytes(0xff);
    ops::fused_moe(L.args(), L.params(), s.get(), i ? nullptr : &ws, one);
    s.sync();
    EXPECT_TRUE(same_bits(got, L.out.to_host())) << "run " << i;
  }
  // The box height changes the ring, the pieces and the last box's zero
  // rows, never a sum: 24 rows (one gate/up column per stage), 40 (a last
  // box past H) and 256 (two boxes).
  for (int rows : {24, 40, 256}) {
    ops::FusedMoeOptions r = one;
    r.decode_split_box_rows = rows;
    EXPECT_TRUE(same_bits(got, run(r))) << "decode_split_box_rows=" << rows;
  }
  // The balancing pool moves boxes between CTAs, never a sum: none, one of
  // the two 256-row boxes per unit, 15 of 16 32-row boxes; and from a
  // graph, whose replays must each leave the pool's counters at 0.
  ops::FusedMoeOptions pooled = one;
  for (int pool : {0, 1}) {
    pooled.decode_split_pool = pool;
    EXPECT_TRUE(same_bits(got, run(pooled))) << "decode_split_pool=" << pool;
  }
  pooled.decode_split_box_rows = 32;
  pooled.decode_split_pool = 15;
  EXPECT_TRUE(same_bits(got, run(pooled))) << "decode_split_box_rows=32 decode_split_pool=15";
  expect_graph_replays_bits(L, s, ws, pooled, got, 3);
  expect_graph_replays_bits(L, s, ws, one, got, 1);

  // decode_split = 2 (the work split evenly over every SM; 28 units of 48
  // columns over 132 CTAs: 10-11 columns each, so most CTAs publish from
  // one piece; its down items are full rows, so its sums over I run in
  // another order than decode_split = 1's): against the two kernels
  // (relative RMS), then bitwise the same run after run, at another box
  // height (fewer rows per item, the same sum per row) and from a graph
  // (its counters must come back to 0 each time).
  ops::FusedMoeOptions balanced = one;
  balanced.decode_split = 2;
  const HostTensor bal = run(balanced);
  EXPECT_LE(rms(bal), 1e-2) << "relative RMS difference, decode_split=2 vs two kernels";
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(bal, run(balanced))) << "decode_split=2, run " << i;
  balanced.decode_split_box_rows = 24;
  EXPECT_TRUE(same_bits(bal, run(balanced))) << "decode_split=2 decode_split_box_rows=24";
  expect_graph_replays_bits(L, s, ws, balanced, bal, 3);
  for (const char* w : {"t1-k1", "decode-t1-grouped", "decode-t1-h200"})
    EXPECT_EQ(test::expect_manifest_cases_pass("fused_moe", DeviceType::kCUDA, w, {{"decode_split", 2}}), 1) << w;
}

// The fused gate + mapping launch against the two kernels run apart: every
// output bitwise equal, over both routing modes, one block (T <= 4 by default, 32 at most) and
// many (the last block maps), empty experts (E > T*K), four token-per-block
// choices, and eight launches in a row (the completion counter must come
// back to 0 each time).
TEST(GpuMoeTopkGateMapping, BitwiseEqualsTwoKernels) {
  TC_REQUIRE_GPU();
  struct Case {
    int64_t T, E, K;
    ops::MoeTopkGateParams gp;
    int block_m;
  };
  ops::MoeTopkGateParams ds, qwen, race;
  ds.mode = ops::GateMode::kSigmoidGroupedTopk, ds.renormalize = true, ds.n_group = 8, ds.topk_group = 4,
  ds.scale = 2.5f;
  qwen.renormalize = true;
  race.score_dtype = DType::kF16;
  uint64_t seed_stream = 1;
  // (K = 4, 5 and 6 as well: the last block places token by token from
  // K = 4, and segments of 50 * 4, 100 * 5 or 77 * 6 slots split tokens
  // across warps.)
  for (const Case& c :
       {Case{1, 256, 8, ds, 16}, Case{16, 256, 8, ds, 16}, Case{33, 256, 8, ds, 32}, Case{256, 128, 8, qwen, 32},
        Case{4096, 256, 8, ds, 128}, Case{3000, 8, 2, race, 128}, Case{5, 64, 1, qwen, 16}, Case{50, 64, 4, qwen, 16},
        Case{100, 256, 5, ds, 64}, Case{77, 128, 6, qwen, 32}}) {
    SCOPED_TRACE(::testing::Message() << "T=" << c.T << " E=" << c.E << " K=" << c.K);
    const int64_t rows = ops::moe_fused_mapping_rows(c.T, c.K, c.E, c.block_m);
    DeviceTensor logits(DType::kF32, {c.T, c.E}), bias(DType::kF32, {c.E});
    harness::fill_uniform_device(logits.view(), 20261129, seed_stream++, -4.f, 4.f, nullptr);
    harness::fill_uniform_device(bias.view(), 20261129, seed_stream++, -0.5f, 0.5f, nullptr);
    struct Out {
      DeviceTensor ids, w, counts, offs, pos, p2t, tiles, nt;
    };
    auto make = [&] {
      return Out{DeviceTensor(DType::kI32, {c.T, c.K}),
                 DeviceTensor(DType::kF32, {c.T, c.K}),
                 DeviceTensor(DType::kI32, {c.E}),
                 DeviceTensor(DType::kI32, {c.E + 1}),
                 DeviceTensor(DType::kI32, {c.T, c.K}),
                 DeviceTensor(DType::kI32, {rows}),
                 DeviceTensor(DType::kI32, {rows / c.block_m}),
                 DeviceTensor(DType::kI32, {1})};
    };
    auto gate = [&](Out& o) {
      const bool sig = c.gp.mode == ops::GateMode::kSigmoidGroupedTopk;
      return ops::MoeTopkGateArgs{logits.view(), sig ? std::optional<TensorView>(bias.view()) : std::nullopt,
                                  o.ids.view(), o.w.view()};
    };
    auto map = [](Out& o) {
      return ops::MoeFusedMappingArgs{o.ids.view(), o.counts.view(), o.offs.view(), o.pos.view(),
                                      o.p2t.view(), o.tiles.view(),  o.nt.view()};
    };
    auto poison = [](Out& o) {
      for (DeviceTensor* t : {&o.ids, &o.w, &o.counts, &o.offs, &o.pos, &o.p2t, &o.tiles, &o.nt}) t->fill_bytes(0xa5);
    };
    const ops::MoeFusedMappingParams mp{int(c.E), c.block_m};
    rt::Stream s;
    Out two = make(), one = make();
    poison(two);
    ops::moe_topk_gate(gate(two), c.gp, s.get());
    ops::moe_fused_mapping(map(two), mp, s.get());
    s.sync();
    // Tokens per block: chosen, one (a block per token: the counter path
    // even at T = 1), 7 (partly idle blocks) and 32 (one block up to 32).
    for (int run = 0; run < 8; ++run) {
      const int tpb = std::array<int, 4>{0, 1, 7, 32}[run % 4];
      SCOPED_TRACE(::testing::Message() << "tokens_per_block=" << tpb);
      poison(one);
      ops::moe_topk_gate_mapping(gate(one), c.gp, map(one), mp, s.get(), {}, tpb);
      s.sync();
      const char* names[] = {"ids",          "weights",     "tokens_per_expert", "expert_offsets", "token_topk_to_pos",
                             "pos_to_token", "tile_expert", "num_tiles"};
      const DeviceTensor* a[] = {&two.ids, &two.w, &two.counts, &two.offs, &two.pos, &two.p2t, &two.tiles, &two.nt};
      const DeviceTensor* b[] = {&one.ids, &one.w, &one.counts, &one.offs, &one.pos, &one.p2t, &one.tiles, &one.nt};
      for (int i = 0; i < 8; ++i)
        EXPECT_TRUE(same_bits(a[i]->to_host(), b[i]->to_host())) << names[i] << " run " << run;
    }
  }
}

// The gate + mapping kernel compiled with the option `trace` (DeepSeek-V3
// routing, T = 256, 4 tokens a block: 64 blocks): the same outputs as
// without it, and its stamps (kernels/moe/gate_mapping.cuh names the
// slots): every block stamped 0, 1, 9, 10, 2, 3, 4 in that order; exactly
// one block, the last, stamped 5-8 after its 4; every stamp names the one
// launch; and reading clears them.
TEST(GpuTrace, GateMappingStampsInOrder) {
  TC_REQUIRE_GPU();
  const int64_t T = 256, E = 256, K = 8;
  const int block_m = 64, tpb = 4, blocks = int(T / tpb);
  ops::MoeTopkGateParams gp;
  gp.mode = ops::GateMode::kSigmoidGroupedTopk, gp.renormalize = true, gp.n_group = 8, gp.topk_group = 4;
  const int64_t rows = ops::moe_fused_mapping_rows(T, K, E, block_m);
  DeviceTensor logits(DType::kF32, {T, E}), bias(DType::kF32, {E});
  harness::fill_uniform_device(logits.view(), 20261130, 1, -4.f, 4.f, nullptr);
  harness::fill_uniform_device(bias.view(), 20261130, 2, -0.5f, 0.5f, nullptr);
  // ids, weights, counts, offsets, slot rows, row tokens, tile owners, tile count
  auto make = [&] {
    std::vector<DeviceTensor> o;
    o.emplace_back(DType::kI32, Shape{T, K}), o.emplace_back(DType::kF32, Shape{T, K});
    o.emplace_back(DType::kI32, Shape{E}), o.emplace_back(DType::kI32, Shape{E + 1});
    o.emplace_back(DType::kI32, Shape{T, K}), o.emplace_back(DType::kI32, Shape{rows});
    o.emplace_back(DType::kI32, Shape{rows / block_m}), o.emplace_back(DType::kI32, Shape{1});
    return o;
  };
  rt::Stream s;
  auto run = [&](std::vector<DeviceTensor>& o, const jit::CompileOptions& opts) {
    for (DeviceTensor& t : o) t.fill_bytes(0xa5);
    ops::moe_topk_gate_mapping(
        {logits.view(), bias.view(), o[0].view(), o[1].view()}, gp,
        {o[0].view(), o[2].view(), o[3].view(), o[4].view(), o[5].view(), o[6].view(), o[7].view()}, {int(E), block_m},
        s.get(), opts, tpb);
    s.sync();
  };
  std::vector<DeviceTensor> plain = make(), traced = make();
  run(plain, {});
  jit::take_traces(0);  // anything an earlier test left
  run(traced, jit::CompileOptions::parse("release,trace"));
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_TRUE(same_bits(plain[i].to_host(), traced[i].to_host())) << "output " << i;

  const auto traces = jit::take_traces(0);
  const jit::KernelTrace* t = nullptr;
  for (const auto& k : traces)
    if (k.function.find("topk_gate_mapping_kernel") != std::string::npos) t = &k;
  ASSERT_NE(t, nullptr) << traces.size() << " traced kernels";
  auto at = [&](int cta, int slot) { return t->stamps[size_t(cta) * size_t(t->slots) + size_t(slot)]; };
  int last = -1;
  for (int c = 0; c < blocks; ++c) {
    SCOPED_TRACE(::testing::Message() << "block " << c);
    for (int slot : {0, 1, 9, 10, 2, 3, 4}) EXPECT_NE(at(c, slot), 0u) << "slot " << slot;
    EXPECT_LE(at(c, 0), at(c, 1));
    EXPECT_LE(at(c, 1), at(c, 9));
    EXPECT_LE(at(c, 9), at(c, 10));
    EXPECT_LE(at(c, 10), at(c, 2));
    EXPECT_LE(at(c, 2), at(c, 3));
    EXPECT_LE(at(c, 3), at(c, 4));
    if (at(c, 5)) {
      EXPECT_EQ(last, -1) << "a second block mapped";
      last = c;
    }
  }
  for (int c = blocks; c < t->ctas; ++c) EXPECT_EQ(at(c, 0), 0u) << "block " << c << " past the grid";
  ASSERT_GE(last, 0) << "no block stamped the mapping";
  for (int slot = 5; slot < 8; ++slot) EXPECT_LE(at(last, slot - 1), at(last, slot)) << "slot " << slot;
  EXPECT_LE(at(last, 7), at(last, 8));
  // One launch stamped them all, and it names itself (%gridid).
  ASSERT_EQ(t->grids.size(), t->stamps.size());
  std::set<unsigned long long> launches;
  for (size_t i = 0; i < t->stamps.size(); ++i)
    if (t->stamps[i]) launches.insert(t->grids[i]);
  EXPECT_EQ(launches.size(), 1u);
  EXPECT_EQ(harness::summarize_trace(*t).size(), 11u) << "slots 0-10";
  EXPECT_TRUE(jit::take_traces(0).empty()) << "the buffers were not cleared";
}

namespace {
// The stamps of every CTA of the last launch of each traced kernel whose
// name holds `function`, checked to come in the order of `chains` (each a
// list of slots a CTA stamps in that order when it stamps them; `always`
// slots every CTA stamps). Returns how many such kernels were read.
int expect_stamp_order(const std::vector<jit::KernelTrace>& traces, const std::string& function,
                       const std::vector<std::vector<int>>& chains, const std::vector<int>& always) {
  int kernels = 0;
  for (const jit::KernelTrace& t : traces) {
    if (t.function.find(function) == std::string::npos) continue;
    ++kernels;
    SCOPED_TRACE(t.function + " [" + t.config + "]");
    const auto ctas = harness::trace_ctas(t);
    EXPECT_FALSE(ctas.empty());
    for (const harness::TraceCta& c : ctas) {
      SCOPED_TRACE(::testing::Message() << "CTA " << c.cta << " on SM " << c.sm);
      EXPECT_GE(c.sm, 0);
      std::map<int, double> at;
      for (size_t i = 0; i < c.slots.size(); ++i) at[c.slots[i]] = c.us[i];
      for (int s : always) {
        EXPECT_TRUE(at.count(s)) << "slot " << s;
      }
      for (const auto& chain : chains) {
        int prev = -1;  // the chain's last slot this CTA stamped
        for (int s : chain) {
          if (!at.count(s)) continue;
          if (prev >= 0) {
            EXPECT_LE(at[prev], at[s]) << "slot " << prev << " after slot " << s;
          }
          prev = s;
        }
      }
    }
  }
  return kernels;
}
}  // namespace

// The layer's GEMM kernels under the option `trace` keep their bits and
// stamp in order (the slots their kernels' comments name): on sm_90 the
// warp-specialised GEMMs of a prefill layer (256 rows per expert: router,
// gate/up, down), every CTA past its wait (0, 1), its producer done (3)
// and both consumers done (6, 9), a CTA with tiles from its first tile's
// start to its last tile's to its end; at T = 1 the decode path's GEMV and
// its fused combine (0, 1, 2 in order in every CTA).
TEST(GpuTrace, LayerGemmStampsInOrder) {
  TC_REQUIRE_GPU();
  const auto traced = jit::CompileOptions::parse("release,trace");
  auto run_both = [&](Layer& L, ops::FusedMoeOptions o) {
    rt::Stream s;
    ops::fused_moe(L.args(), L.params(), s.get(), nullptr, o);
    s.sync();
    const HostTensor want = L.out.to_host();
    jit::take_traces(0);  // anything an earlier run left
    L.out.fill_bytes(0xff);
    o.compile = traced;
    ops::fused_moe(L.args(), L.params(), s.get(), nullptr, o);
    s.sync();
    EXPECT_TRUE(same_bits(want, L.out.to_host())) << "the traced kernels changed the output";
    return jit::take_traces(0);
  };
  if (rt::device_info(0).cc_major == 9) {
    Layer prefill(2048, 32, 4, 99);
    const auto traces = run_both(prefill, {});
    EXPECT_GE(expect_stamp_order(traces, "grouped_gemm_sm90_ws_kernel", {{0, 1, 2, 3}, {1, 4, 5, 6}, {1, 7, 8, 9}},
                                 {0, 1, 3, 6, 9}),
              2)
        << "gate/up and down at least";
  }
  Layer decode(1, 32, 4, 99);
  ops::FusedMoeOptions o;
  o.decode = 1, o.decode_split = 0;
  const auto traces = run_both(decode, o);
  EXPECT_EQ(expect_stamp_order(traces, "grouped_gemv_kernel", {{0, 1, 2}}, {0, 1, 2}), 1);
  EXPECT_EQ(expect_stamp_order(traces, "grouped_gemv_combine_kernel", {{0, 1, 2}}, {0, 1, 2}), 1);
}
