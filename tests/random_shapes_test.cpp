// The random-shape generator's workloads are valid, and the host picks kernels
// for every one of them on both targets (no GPU needed: the choice of
// kernels and configs is host code). The GPU test runs them
// (gpu_random_shapes_test.cpp).
#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "random_shapes.h"
#include "test_util.h"
#include "tilecraft/harness/runner.h"

namespace tilecraft {
using namespace harness;

namespace {
void expect_kernels_chosen(const std::string& op, const std::vector<std::string>& shapes,
                           const std::map<std::string, int>& config = {}) {
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
    for (const auto& c : cases)
      for (int cc : {9, 8}) {
        RunOptions o;
        o.cc_major = cc;
        o.checked = true;
        o.config = config;
        EXPECT_NO_THROW(adapter_for(op).kernels(c, o)) << "sm_" << cc << "0, variant " << c.variant->name;
      }
  }
}
}  // namespace

TEST(RandomShapes, LayersAreValidAndGetKernels) {
  const auto shapes = test::random_layer_shapes(test::random_shape_seed(), 48);
  EXPECT_EQ(shapes, test::random_layer_shapes(test::random_shape_seed(), 48)) << "the draw must repeat for a seed";
  expect_kernels_chosen("fused_moe", shapes);
  // (GpuRandomShapes.LayersOnMmaSync runs the first half so)
  expect_kernels_chosen("fused_moe", test::random_layer_shapes(test::random_shape_seed(), 24), {{"sm90", 0}});
}

TEST(RandomShapes, GroupedGemmsAreValidAndGetKernels) {
  expect_kernels_chosen("moe_grouped_gemm", test::random_gemm_shapes(test::random_shape_seed(), 48));
}

TEST(RandomShapes, RoutingAndCombineAreValidAndGetKernels) {
  const uint64_t seed = test::random_shape_seed();
  expect_kernels_chosen("moe_topk_gate", test::random_gate_shapes(seed, 48));
  expect_kernels_chosen("moe_fused_mapping", test::random_mapping_shapes(seed, 48));
  expect_kernels_chosen("moe_reduce_fused", test::random_reduce_shapes(seed, 48));
}
}  // namespace tilecraft
