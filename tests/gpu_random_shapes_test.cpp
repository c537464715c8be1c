// Layers and grouped GEMMs of seeded random shapes on the GPU, each against
// its golden (full for small cases, sampled tokens for large ones), through
// the same harness path as `tilecraft test`. The shapes come from
// random_shapes.h: every failure names its --shape string, which reproduces
// it alone; TILECRAFT_SHAPE_SEED draws another set.
#include <gtest/gtest.h>

#include <deque>

#include "test_util.h"
#include "tilecraft/harness/random_shapes.h"
#include "tilecraft/harness/runner.h"
#include "tilecraft/runtime/device.h"

namespace tilecraft {

TEST(GpuRandomShapes, Layers) {
  TC_REQUIRE_GPU();
  const uint64_t seed = test::random_shape_seed();
  std::cout << "random layer shapes, seed " << seed << std::endl;
  EXPECT_EQ(test::expect_shape_cases_pass("fused_moe", DeviceType::kCUDA, harness::random_layer_shapes(seed, 48)), 48);
}

// The same layers' first half on the arch-neutral kernels (mma.sync grouped
// GEMMs, as on GPUs before sm_90).
TEST(GpuRandomShapes, LayersOnMmaSync) {
  TC_REQUIRE_GPU();
  const auto shapes = harness::random_layer_shapes(test::random_shape_seed(), 24);
  EXPECT_EQ(test::expect_shape_cases_pass("fused_moe", DeviceType::kCUDA, shapes, {{"sm90", 0}}), 24);
}

// The layer is deterministic (no atomics in the combine) on random shapes
// too: two runs of each record the same output bits.
TEST(GpuRandomShapes, LayersAreDeterministic) {
  TC_REQUIRE_GPU();
  const harness::Manifest m = harness::Manifest::load();
  harness::Selection s;
  s.op = "fused_moe";
  s.shapes = harness::random_layer_shapes(test::random_shape_seed(), 16);
  std::deque<harness::WorkloadSpec> storage;
  const auto env = harness::capture_env();
  harness::RunOptions o;
  o.checked = true;
  for (const auto& c : harness::select_cases(m, s, storage)) {
    const auto r1 = harness::run_correctness(c, DeviceType::kCUDA, o, env);
    const auto r2 = harness::run_correctness(c, DeviceType::kCUDA, o, env);
    EXPECT_EQ(r1.at("status"), "pass") << c.workload->name << ": " << r1.dump();
    EXPECT_EQ(r1.at("output_sha256"), r2.at("output_sha256")) << c.workload->name;
  }
}

TEST(GpuRandomShapes, GroupedGemms) {
  TC_REQUIRE_GPU();
  const auto shapes = harness::random_gemm_shapes(test::random_shape_seed(), 48);
  EXPECT_EQ(test::expect_shape_cases_pass("moe_grouped_gemm", DeviceType::kCUDA, shapes), 48 * 3);  // 3 variants
}

TEST(GpuRandomShapes, RoutingAndCombine) {
  TC_REQUIRE_GPU();
  const uint64_t seed = test::random_shape_seed();
  EXPECT_EQ(test::expect_shape_cases_pass("moe_topk_gate", DeviceType::kCUDA, harness::random_gate_shapes(seed, 48)), 48);
  EXPECT_EQ(
      test::expect_shape_cases_pass("moe_fused_mapping", DeviceType::kCUDA, harness::random_mapping_shapes(seed, 48)), 48);
  EXPECT_EQ(test::expect_shape_cases_pass("moe_reduce_fused", DeviceType::kCUDA, harness::random_reduce_shapes(seed, 24)),
            24 * 8);  // 8 variants
}
// The same draws under random kernel config overrides (1-3 keys each, in
// and beyond their ranges; harness::with_random_configs): every case passes
// its golden under its overrides or is refused naming one of its keys.
// Overrides reach kernel forms no heuristic picks for these shapes (CTA
// pairs, stagger, split K, bulk decode, one-kernel decode splits...).
TEST(GpuRandomConfigs, Layers) {
  TC_REQUIRE_GPU();
  const uint64_t seed = test::random_shape_seed();
  const auto shapes = harness::with_random_configs("fused_moe", harness::random_layer_shapes(seed + 1, 48), seed);
  const test::PassedRefused n = test::expect_config_cases_pass_or_refused("fused_moe", DeviceType::kCUDA, shapes);
  std::cout << n.passed << " passed, " << n.refused << " refused" << std::endl;
  EXPECT_GE(n.passed * 5, n.passed + n.refused) << "at least a fifth of the draws must run";
}

TEST(GpuRandomConfigs, GroupedGemmsMappingsAndCombines) {
  TC_REQUIRE_GPU();
  const uint64_t seed = test::random_shape_seed();
  for (const auto& [op, shapes] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"moe_grouped_gemm", harness::random_gemm_shapes(seed + 1, 32)},
           {"moe_fused_mapping", harness::random_mapping_shapes(seed + 1, 24)},
           {"moe_reduce_fused", harness::random_reduce_shapes(seed + 1, 8)}}) {
    SCOPED_TRACE(op);
    const test::PassedRefused n =
        test::expect_config_cases_pass_or_refused(op, DeviceType::kCUDA, harness::with_random_configs(op, shapes, seed));
    std::cout << op << ": " << n.passed << " passed, " << n.refused << " refused" << std::endl;
    EXPECT_GE(n.passed * 5, n.passed + n.refused) << "at least a fifth of the draws must run";
  }
}
}  // namespace tilecraft
