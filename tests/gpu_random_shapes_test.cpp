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
}  // namespace tilecraft
