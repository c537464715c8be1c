// The random-shape generator's workloads are valid, and the host picks kernels
// for every one of them on both targets (no GPU needed: the choice of
// kernels and configs is host code). The GPU test runs them
// (gpu_random_shapes_test.cpp).

#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "test_util.h"
#include "tilecraft/harness/random_shapes.h"
#include "tilecraft/harness/runner.h"
#include "tilecraft/jit/jit.h"

namespace tilecraft {
using namespace harness;

namespace {
// fn(case) for every case of every --shape of op, under a trace naming the shape.
template <typename Fn>
void for_each_case(const std::string& op, const std::vector<std::string>& shapes, Fn fn) {
  const auto m = Manifest::load();
  for (const auto& text : shapes) {
    SCOPED_TRACE(op + " --shape '" + text + "'");
    Selection s;
    s.op = op;
    s.shapes = {text};
    std::deque<WorkloadSpec> storage;
    std::vector<Case> cases;
    ASSERT_NO_THROW(cases = select_cases(m, s, storage));
    ASSERT_FALSE(cases.empty());
    for (const auto& c : cases) fn(c);
  }
}

void expect_kernels_chosen(const std::string& op, const std::vector<std::string>& shapes,
                           const std::map<std::string, int>& config = {}) {
  for_each_case(op, shapes, [&](const Case& c) {
    for (int cc : {9, 8}) {
      RunOptions o;
      o.cc_major = cc;
      o.checked = true;
      o.config = config;
      EXPECT_NO_THROW(adapter_for(op).kernels(c, o)) << "sm_" << cc << "0, variant " << c.variant->name;
    }
  });
}
}  // namespace

TEST(RandomShapes, LayersAreValidAndGetKernels) {
  const auto shapes = harness::random_layer_shapes(test::random_shape_seed(), 48);
  EXPECT_EQ(shapes, harness::random_layer_shapes(test::random_shape_seed(), 48)) << "the draw must repeat for a seed";
  expect_kernels_chosen("fused_moe", shapes);
  // (GpuRandomShapes.LayersOnMmaSync runs the first half so)
  expect_kernels_chosen("fused_moe", harness::random_layer_shapes(test::random_shape_seed(), 24), {{"sm90", 0}});
}

TEST(RandomShapes, GroupedGemmsAreValidAndGetKernels) {
  expect_kernels_chosen("moe_grouped_gemm", harness::random_gemm_shapes(test::random_shape_seed(), 48));
}

TEST(RandomShapes, RoutingAndCombineAreValidAndGetKernels) {
  const uint64_t seed = test::random_shape_seed();
  expect_kernels_chosen("moe_topk_gate", harness::random_gate_shapes(seed, 48));
  expect_kernels_chosen("moe_fused_mapping", harness::random_mapping_shapes(seed, 48));
  expect_kernels_chosen("moe_reduce_fused", harness::random_reduce_shapes(seed, 48));
}

// The kernels the host picks by default for random layers and grouped GEMMs
// compile for sm_90a without spilling: a register split or tile that no
// manifest workload uses shows here first (session 53: the cp.async-weights
// GEMM spilled 12-156 bytes a thread in its producer, which cost it 15%).
// One form is let through at 16 bytes or fewer: the mma.sync kernel with
// 16-row tiles and [K, N] weights spills 8-16 bytes in some shapes. Its SASS
// (session 54, e.g. bf16->fp32 bn=128 ptr-table64: STL of two words after
// the grid setup, LDL of them once per tile at the loop's end) shows the
// spilled value is the grouped CTA loop's 64-bit end bound (`live` in
// grouped_gemm.cuh), kept across the tile body: one 8-byte reload per tile.
// As a 32-bit bound it still spilled (4 bytes; tried): ptxas's own choice at
// 72 registers, since no cap or occupancy target binds there.
TEST(RandomShapes, DefaultKernelsCompileWithoutSpills) {
  const uint64_t seed = test::random_shape_seed();
  int kernels = 0;
  for (const auto& [op, shapes] : {std::pair{std::string("fused_moe"), harness::random_layer_shapes(seed, 48)},
                                   std::pair{std::string("moe_grouped_gemm"), harness::random_gemm_shapes(seed, 48)}})
    for_each_case(op, shapes, [&, op = op](const Case& c) {
      RunOptions o;
      o.cc_major = 9;
      for (const auto& spec : adapter_for(op).kernels(c, o)) {
        const auto k = jit::compile(spec, {}, "sm_90a");
        const auto has = [&](const char* part) { return spec.config.find(part) != std::string::npos; };
        const bool known = has(" mma bm=16 ") && has(" KN") && k->resources.spill_store_bytes <= 16;
        EXPECT_TRUE(k->resources.spill_store_bytes == 0 || known)
            << spec.config << ": " << k->resources.spill_store_bytes << " bytes spilled";
        ++kernels;
      }
    });
  EXPECT_GT(kernels, 40);
}

// A count past what a run could finish (2e9 draws filled the host's memory
// before the first case) or below zero is refused, naming the flag.
TEST(RandomShapes, CountIsBounded) {
  TC_EXPECT_ERROR(random_shapes("moe_reduce_fused", 1, 2000000000), ErrorKind::kInvalidArgument, "--random",
                  "0..100000", "2000000000");
  TC_EXPECT_ERROR(random_shapes("fused_moe", 1, -5), ErrorKind::kInvalidArgument, "--random", "-5");
  EXPECT_EQ(random_shapes("moe_reduce_fused", 1, 0).size(), 0u);
}

// The CPU backend (the reference implementations) on small draws of every op,
// against the float64 checks: a bound that cannot hold (session 38 found fp16
// results in the subnormal range) fails here, in CI, before any GPU run.
TEST(RandomShapes, CpuBackendPassesItsChecks) {
  const uint64_t seed = test::random_shape_seed();
  const harness::ShapeBudget small{2'000'000, 40'000'000};
  EXPECT_EQ(test::expect_shape_cases_pass("fused_moe", DeviceType::kCPU, harness::random_layer_shapes(seed, 12, small)),
            12);
  EXPECT_EQ(
      test::expect_shape_cases_pass("moe_grouped_gemm", DeviceType::kCPU, harness::random_gemm_shapes(seed, 12, small)),
      12 * 3);
  EXPECT_EQ(test::expect_shape_cases_pass("moe_topk_gate", DeviceType::kCPU, harness::random_gate_shapes(seed, 16)), 16);
  EXPECT_EQ(test::expect_shape_cases_pass("moe_fused_mapping", DeviceType::kCPU, harness::random_mapping_shapes(seed, 16)),
            16);
}
// Random config overrides (harness::with_random_configs): the draw repeats
// for a seed and keeps each shape; on the CPU backend, where a config is
// resolved as sm_90a's kernels would take it, every small draw of every op
// with keys passes or is refused naming one of its keys, and enough pass (a fifth)
// that GpuRandomConfigs runs kernels under overrides, not refusals only.
TEST(RandomShapes, ConfigDrawsPassOrAreRefusedByName) {
  const uint64_t seed = test::random_shape_seed();
  const harness::ShapeBudget small{2'000'000, 40'000'000};
  const auto plain = harness::random_layer_shapes(seed, 16, small);
  const auto drawn = harness::with_random_configs("fused_moe", plain, seed);
  ASSERT_EQ(drawn.size(), plain.size());
  EXPECT_EQ(drawn, harness::with_random_configs("fused_moe", plain, seed)) << "the draw must repeat for a seed";
  for (size_t i = 0; i < drawn.size(); ++i) EXPECT_EQ(drawn[i].rfind(plain[i] + ",", 0), 0u) << drawn[i];
  for (const auto& text : drawn) EXPECT_NE(text.find(",config="), std::string::npos) << text;
  const std::vector<std::pair<std::string, std::vector<std::string>>> sets = {
      {"fused_moe", drawn},
      {"moe_grouped_gemm", harness::with_random_configs("moe_grouped_gemm", harness::random_gemm_shapes(seed, 12, small), seed)},
      {"moe_fused_mapping", harness::with_random_configs("moe_fused_mapping", harness::random_mapping_shapes(seed, 16), seed)},
      {"moe_reduce_fused", harness::with_random_configs("moe_reduce_fused", harness::random_reduce_shapes(seed, 6), seed)},
  };
  for (const auto& [op, shapes] : sets) {
    SCOPED_TRACE(op);
    const test::PassedRefused n = test::expect_config_cases_pass_or_refused(op, DeviceType::kCPU, shapes);
    std::cout << op << ": " << n.passed << " passed, " << n.refused << " refused" << std::endl;
    EXPECT_GE(n.passed * 5, n.passed + n.refused) << "at least a fifth of the draws must run";
  }
  TC_EXPECT_ERROR(harness::with_random_configs("moe_topk_gate", {"T=1"}, seed), ErrorKind::kInvalidArgument,
                  "--random-config", "moe_topk_gate");
}
}  // namespace tilecraft
