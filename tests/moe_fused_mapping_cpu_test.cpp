// moe_fused_mapping on the CPU: a hand-checked layout, validation, and the
// manifest cases through the harness (golden + structural invariants).
#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"
#include "tilecraft/harness/runner.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/ops/moe_fused_mapping.h"

using namespace tilecraft;
using namespace tilecraft::ops;

TEST(MoeFusedMapping, HandCheckedLayout) {
  // 3 tokens, K=2, 3 experts, rows padded to 2.
  HostTensor ids(DType::kI32, {3, 2});
  int32_t v[6] = {2, 0, 0, 2, 2, -1};
  std::copy(v, v + 6, ids.ptr<int32_t>());
  const int64_t rows = moe_fused_mapping_rows(3, 2, 3, 2);
  EXPECT_EQ(rows, 10);
  HostTensor cnt(DType::kI32, {3}), off(DType::kI32, {4}), pos(DType::kI32, {3, 2}), p2t(DType::kI32, {rows}),
      tile(DType::kI32, {rows / 2}), nt(DType::kI32, {1});
  moe_fused_mapping_cpu({ids.view(), cnt.view(), off.view(), pos.view(), p2t.view(), tile.view(), nt.view()}, {3, 2});
  EXPECT_EQ(std::vector<int>(cnt.ptr<int32_t>(), cnt.ptr<int32_t>() + 3), (std::vector<int>{2, 0, 3}));
  EXPECT_EQ(std::vector<int>(off.ptr<int32_t>(), off.ptr<int32_t>() + 4), (std::vector<int>{0, 2, 2, 6}));
  EXPECT_EQ(std::vector<int>(pos.ptr<int32_t>(), pos.ptr<int32_t>() + 6), (std::vector<int>{2, 0, 1, 3, 4, -1}));
  EXPECT_EQ(std::vector<int>(p2t.ptr<int32_t>(), p2t.ptr<int32_t>() + 10),
            (std::vector<int>{0, 1, 0, 1, 2, -1, -1, -1, -1, -1}));
  EXPECT_EQ(std::vector<int>(tile.ptr<int32_t>(), tile.ptr<int32_t>() + 5), (std::vector<int>{0, 2, 2, -1, -1}));
  EXPECT_EQ(nt.ptr<int32_t>()[0], 3);
}

TEST(MoeFusedMapping, ValidationMessages) {
  HostTensor ids(DType::kI32, {4, 2}), cnt(DType::kI32, {5}), off(DType::kI32, {6}), pos(DType::kI32, {4, 2}),
      p2t(DType::kI32, {8}), tile(DType::kI32, {8}), nt(DType::kI32, {1});
  MoeFusedMappingArgs a{ids.view(), cnt.view(), off.view(), pos.view(), p2t.view(), tile.view(), nt.view()};
  TC_EXPECT_ERROR(moe_fused_mapping_cpu(a, {5, 4}), ErrorKind::kInvalidArgument, "moe_fused_mapping", "'pos_to_token'",
                  "[24]", "[8]");
  TC_EXPECT_ERROR(moe_fused_mapping_cpu(a, {0, 1}), ErrorKind::kInvalidArgument, "num_experts", "1..1024", "0");
  HostTensor ids64(DType::kI64, {4, 2});
  a.ids = ids64.view();
  TC_EXPECT_ERROR(moe_fused_mapping_cpu(a, {5, 1}), ErrorKind::kType, "'ids'", "int32", "int64");
}

// Blocks: as asked, else one below 8192 slots and one per 1024 slots above,
// at least 2 and at most one per SM; out-of-range requests are errors.
TEST(MoeFusedMapping, BlocksChoice) {
  EXPECT_EQ(moe_fused_mapping_blocks(1, 0, 132), 1);
  EXPECT_EQ(moe_fused_mapping_blocks(8191, 0, 132), 1);
  EXPECT_EQ(moe_fused_mapping_blocks(8192, 0, 132), 8);
  EXPECT_EQ(moe_fused_mapping_blocks(32768, 0, 132), 32);
  EXPECT_EQ(moe_fused_mapping_blocks(1 << 20, 0, 132), 132);
  EXPECT_EQ(moe_fused_mapping_blocks(1 << 20, 0, 0), 132);  // SMs unknown
  EXPECT_EQ(moe_fused_mapping_blocks(100, 3, 132), 3);      // asked: even more blocks than slots
  EXPECT_EQ(moe_fused_mapping_blocks(1 << 20, 1, 132), 1);
  HostTensor ids(DType::kI32, {4, 2}), cnt(DType::kI32, {5}), off(DType::kI32, {6}), pos(DType::kI32, {4, 2}),
      p2t(DType::kI32, {moe_fused_mapping_rows(4, 2, 5, 4)}), tile(DType::kI32, {moe_fused_mapping_rows(4, 2, 5, 4) / 4}),
      nt(DType::kI32, {1});
  MoeFusedMappingArgs a{ids.view(), cnt.view(), off.view(), pos.view(), p2t.view(), tile.view(), nt.view()};
  MoeFusedMappingParams p{5, 4};
  p.blocks = -1;
  TC_EXPECT_ERROR(moe_fused_mapping_cpu(a, p), ErrorKind::kInvalidArgument, "moe_fused_mapping", "blocks", "0 (choose)",
                  "-1");
  p.blocks = 1025;
  TC_EXPECT_ERROR(moe_fused_mapping_cpu(a, p), ErrorKind::kInvalidArgument, "blocks", "up to 1024", "1025");
}

// The mapping's kernels run 1024 threads a block: within 64 registers and
// no spills on sm_90a.
TEST(MoeFusedMapping, KernelsCompileWithoutSpills) {
  auto specs = moe_fused_mapping_block_kernel_specs();
  specs.push_back(moe_fused_mapping_kernel_spec());
  ASSERT_EQ(specs.size(), 3u);
  for (const auto& spec : specs) {
    const auto k = jit::compile(spec, {}, "sm_90a");
    EXPECT_EQ(k->resources.spill_store_bytes, 0) << spec.function;
    EXPECT_LE(k->resources.registers, 64) << spec.function;
  }
}

TEST(MoeFusedMapping, ManifestCasesPassOnCpu) {
  EXPECT_GT(test::expect_manifest_cases_pass("moe_fused_mapping", DeviceType::kCPU), 10);
}

// The fused gate + mapping kernel runs 1024 threads a block (the mapping's
// block size): it must compile for sm_90a within 64 registers, with no
// spills, for both routing modes, up to E = 256 and K = 8 (the layer runs
// the two kernels apart beyond: the gate's registers spill at 1024 threads,
// 20 bytes at E = 256, K = 16).
TEST(MoeTopkGateMapping, CompilesWithoutSpills) {
  struct Shape3 {
    int64_t E, K;
    ops::GateMode mode;
    DType scores;
  };
  for (const Shape3 s : {Shape3{256, 8, ops::GateMode::kSigmoidGroupedTopk, DType::kF32},
                         Shape3{256, 8, ops::GateMode::kSigmoidGroupedTopk, DType::kBF16},
                         Shape3{128, 8, ops::GateMode::kSoftmaxTopk, DType::kF32},
                         Shape3{8, 4, ops::GateMode::kSoftmaxTopk, DType::kF16}}) {
    HostTensor logits(DType::kF32, {4, s.E}), ids(DType::kI32, {4, s.K}), w(DType::kF32, {4, s.K});
    ops::MoeTopkGateParams gp;
    gp.mode = s.mode;
    gp.score_dtype = s.scores;
    const auto spec = ops::moe_topk_gate_mapping_kernel_spec({logits.view(), std::nullopt, ids.view(), w.view()}, gp);
    EXPECT_EQ(spec.function, "tc::moe::topk_gate_mapping_kernel");
    EXPECT_TRUE(ops::moe_topk_gate_mapping_fits(s.E, s.K));
    const auto k = jit::compile(spec, {}, "sm_90a");
    EXPECT_EQ(k->resources.spill_store_bytes, 0) << spec.config;
    EXPECT_LE(k->resources.registers, 64) << spec.config;
  }
}

TEST(MoeTopkGateMapping, IdsMustBeTheGatesOutput) {
  EXPECT_FALSE(ops::moe_topk_gate_mapping_fits(257, 8));
  EXPECT_FALSE(ops::moe_topk_gate_mapping_fits(256, 9));
  HostTensor logits(DType::kF32, {4, 16}), ids(DType::kI32, {4, 2}), other(DType::kI32, {4, 2}), w(DType::kF32, {4, 2});
  const int64_t rows = ops::moe_fused_mapping_rows(4, 2, 16, 16);
  HostTensor counts(DType::kI32, {16}), offs(DType::kI32, {17}), pos(DType::kI32, {4, 2}), p2t(DType::kI32, {rows}),
      tiles(DType::kI32, {rows / 16}), nt(DType::kI32, {1});
  const ops::MoeFusedMappingArgs m{other.view(), counts.view(), offs.view(), pos.view(), p2t.view(), tiles.view(),
                                   nt.view()};
  TC_EXPECT_ERROR(ops::moe_topk_gate_mapping({logits.view(), std::nullopt, ids.view(), w.view()}, {}, m, {16, 16},
                                             nullptr),
                  ErrorKind::kInvalidArgument, "ids", "the gate's ids");
}

// Tokens per block of the fused launch: 4, more only where blocks of 4
// would exceed one per SM, at most 32; a choice outside 1..32 is an error
// naming the argument.
TEST(MoeTopkGateMapping, TokensPerBlockRule) {
  EXPECT_EQ(ops::moe_topk_gate_mapping_tokens_per_block(1, 132), 4);
  EXPECT_EQ(ops::moe_topk_gate_mapping_tokens_per_block(16, 132), 4);
  EXPECT_EQ(ops::moe_topk_gate_mapping_tokens_per_block(528, 132), 4);
  EXPECT_EQ(ops::moe_topk_gate_mapping_tokens_per_block(529, 132), 5);
  EXPECT_EQ(ops::moe_topk_gate_mapping_tokens_per_block(529, 0), 5);  // unknown: 132 SMs
  EXPECT_EQ(ops::moe_topk_gate_mapping_tokens_per_block(1000, 132), 8);
  EXPECT_EQ(ops::moe_topk_gate_mapping_tokens_per_block(100000, 132), 32);
  HostTensor logits(DType::kF32, {4, 16}), ids(DType::kI32, {4, 2}), w(DType::kF32, {4, 2});
  const int64_t rows = ops::moe_fused_mapping_rows(4, 2, 16, 16);
  HostTensor counts(DType::kI32, {16}), offs(DType::kI32, {17}), pos(DType::kI32, {4, 2}), p2t(DType::kI32, {rows}),
      tiles(DType::kI32, {rows / 16}), nt(DType::kI32, {1});
  const ops::MoeFusedMappingArgs m{ids.view(), counts.view(), offs.view(), pos.view(), p2t.view(), tiles.view(),
                                   nt.view()};
  for (int bad : {-1, 33})
    TC_EXPECT_ERROR(ops::moe_topk_gate_mapping({logits.view(), std::nullopt, ids.view(), w.view()}, {}, m, {16, 16},
                                               nullptr, {}, bad),
                    ErrorKind::kInvalidArgument, "tokens_per_block", "1..32");
}

// Code budgets of the routing kernels (SASS instructions for sm_90a). They
// run once per layer call, cold: the experts' weights stream through L2
// between calls and evict them, and at decode sizes fetching their code
// cost more than running it (H200, session 18: the DeepSeek-V3 gate, 2936
// instructions with its loops unrolled, took 20K cycles for one token).
// Rolled loops brought it to about 1500. A budget here catches a change
// that unrolls them again; it is a size, not a time.
TEST(MoeTopkGateMapping, RoutingKernelsStayWithinTheirCodeBudgets) {
  struct Budget {
    int64_t E, K;
    ops::GateMode mode;
    int most;
  };
  for (const Budget b : {Budget{256, 8, ops::GateMode::kSigmoidGroupedTopk, 1800},
                         Budget{128, 8, ops::GateMode::kSoftmaxTopk, 800}}) {
    HostTensor logits(DType::kF32, {1, b.E}), ids(DType::kI32, {1, b.K}), w(DType::kF32, {1, b.K});
    ops::MoeTopkGateParams gp;
    gp.mode = b.mode;
    const auto k = jit::compile(ops::moe_topk_gate_kernel_spec({logits.view(), std::nullopt, ids.view(), w.view()}, gp),
                                {}, "sm_90a");
    EXPECT_GT(k->resources.code_bytes, 0);
    EXPECT_LE(k->resources.code_bytes / 16, b.most) << k->spec.config;
  }
  const auto mapping = jit::compile(ops::moe_fused_mapping_kernel_spec(), {}, "sm_90a");
  EXPECT_GT(mapping->resources.code_bytes, 0);
  EXPECT_LE(mapping->resources.code_bytes / 16, 1500);
}
