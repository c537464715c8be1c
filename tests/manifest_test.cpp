#include "tilecraft/harness/manifest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>

#include "test_util.h"
#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/harness/runner.h"

using namespace tilecraft;
using namespace tilecraft::harness;

namespace {
std::string write(const std::string& dir, const std::string& name, const std::string& text) {
  std::string p = dir + "/" + name;
  std::ofstream(p) << text;
  return p;
}
const char* kMiniOp = R"(
ops:
  - name: mini
    family: test
    symbols: [N]
    inputs: [{name: a, dtype: [fp32], shape: [N]}]
    outputs: [{name: out, dtype: [fp32], shape: [N]}]
    variants: [{name: V, bytes: 8*N, flags_typo: 1, flops: N}]
)";
}  // namespace

TEST(Manifest, BuiltinLoadsWithTheTileKernelsMatrix) {
  Manifest m = Manifest::load();
  const OpSpec* op = m.find("moe_reduce_fused");
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->variants.size(), 8u);
  int tk = 0;
  for (auto& w : op->workloads) tk += w.name.rfind("tk-", 0) == 0;
  EXPECT_EQ(tk, 144);
  std::deque<WorkloadSpec> storage;
  Selection s;
  s.op = "moe_reduce_fused";
  s.tag = "full";
  auto cases = select_cases(m, s, storage);
  int tk_cases = 0;
  for (auto& c : cases) tk_cases += c.workload->name.rfind("tk-", 0) == 0;
  EXPECT_EQ(tk_cases, 1152);  // 144 workloads x 8 variants
  // The spec's model table is there, tagged smoke.
  const WorkloadSpec* w = op->workload("deepseek-v3-decode");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->symbols.at("T"), 512);
  EXPECT_EQ(w->symbols.at("H"), 7168);
  EXPECT_TRUE(w->has_tag("smoke"));
}

// --shape runs beside --workload / --tag (shapes alone run just themselves),
// and a --workload or --tag that names nothing is an error even beside a shape.
TEST(Manifest, ShapesRunBesideTheSelectedWorkloads) {
  Manifest m = Manifest::load();
  Selection s;
  s.op = "fused_moe";
  s.workload = "odd-h-i";
  s.shapes = {"T=5,H=64,I=32,E=4,K=2,dtype=bf16"};
  std::deque<WorkloadSpec> storage;
  auto cases = select_cases(m, s, storage);
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].workload->name, "odd-h-i");
  EXPECT_EQ(cases[1].workload->name.rfind("shape:", 0), 0u);
  s.workload.clear();
  EXPECT_EQ(select_cases(m, s, storage).size(), 1u);  // no default-tagged smoke cases
  s.workload = "odd-h-j";
  TC_EXPECT_ERROR(select_cases(m, s, storage), ErrorKind::kInvalidArgument, "--workload", "'odd-h-j'",
                  "op 'fused_moe'");
  s.workload.clear();
  s.tag = "race";
  EXPECT_EQ(select_cases(m, s, storage).size(), 5u);  // four race cases and the shape
  s.tag = "rcae";
  TC_EXPECT_ERROR(select_cases(m, s, storage), ErrorKind::kInvalidArgument, "--tag", "'rcae'");
}

TEST(Manifest, ErrorsNameFileOpAndField) {
  std::string dir = test::temp_dir("manifest");
  std::string p = write(dir, "bad_key.yaml", kMiniOp);
  Manifest m;
  TC_EXPECT_ERROR(m.merge_file(p), ErrorKind::kManifest, "bad_key.yaml", "op 'mini'", "variants[0]", "flags_typo");

  std::string text = kMiniOp;
  text.replace(text.find("flags_typo: 1, "), 15, "");
  text.replace(text.find("bytes: 8*N"), 10, "bytes: 8*M");
  TC_EXPECT_ERROR(Manifest().merge_file(write(dir, "bad_expr.yaml", text)), ErrorKind::kManifest, "bad_expr.yaml",
                  "variants[0].bytes", "unknown symbol 'M'");

  std::string bad_dtype = kMiniOp;
  bad_dtype.replace(bad_dtype.find("flags_typo: 1, "), 15, "");
  bad_dtype.replace(bad_dtype.find("[fp32], shape: [N]}]\n    outputs"), 6, "[fp33]");
  TC_EXPECT_ERROR(Manifest().merge_file(write(dir, "bad_dtype.yaml", bad_dtype)), ErrorKind::kManifest,
                  "bad_dtype.yaml", "inputs[0].dtype", "fp33");

  std::string missing = "ops:\n  - name: m2\n    symbols: [N]\n";
  TC_EXPECT_ERROR(Manifest().merge_file(write(dir, "missing.yaml", missing)), ErrorKind::kManifest, "missing.yaml",
                  "op 'm2'", "family", "missing required field");

  TC_EXPECT_ERROR(Manifest().merge_file(write(dir, "syntax.yaml", "ops: [ {name: x")), ErrorKind::kManifest,
                  "syntax.yaml", "YAML syntax");
}

// Estimates of derived symbols (manifest `estimates`) size a case before its
// data exists: only derived symbols, from the op's own symbols.
TEST(Manifest, EstimatesOfDerivedSymbols) {
  const std::string dir = test::temp_dir("manifest_estimates");
  auto with = [&](const std::string& name, const std::string& lines) {
    std::string text = kMiniOp;
    text.replace(text.find("flags_typo: 1, "), 15, "");
    text.replace(text.find("    inputs:"), 0, lines);
    return write(dir, name, text);
  };
  Manifest ok;
  ok.merge_file(with("ok.yaml", "    derived: [R]\n    estimates: {R: 2*N + 1}\n"));
  ASSERT_NE(ok.find("mini"), nullptr);
  EXPECT_DOUBLE_EQ(ok.find("mini")->estimates.at("R").eval({{"N", 3}}), 7);
  TC_EXPECT_ERROR(Manifest().merge_file(with("own.yaml", "    estimates: {N: 4}\n")), ErrorKind::kManifest,
                  "own.yaml", "estimates.N", "expected a derived symbol");
  TC_EXPECT_ERROR(Manifest().merge_file(with("sym.yaml", "    derived: [R, S]\n    estimates: {R: S*2}\n")),
                  ErrorKind::kManifest, "sym.yaml", "estimates.R", "unknown symbol 'S'");
  TC_EXPECT_ERROR(Manifest().merge_file(with("list.yaml", "    derived: [R]\n    estimates: [R]\n")),
                  ErrorKind::kManifest, "list.yaml", "estimates", "expected a map");
}

// Model-sized cases are refused where the CPU backend stands in for a missing
// GPU (they would run for hours), and sized by the estimates: the grouped
// GEMM's flops need its used rows, which only generated data gives.
TEST(Manifest, CpuStandInRefusesModelSizedWork) {
  Manifest m = Manifest::load();
  std::deque<WorkloadSpec> storage;
  auto one = [&](const std::string& op, const std::string& w) {
    Selection s;
    s.op = op;
    s.workload = w;
    auto cases = select_cases(m, s, storage);
    EXPECT_FALSE(cases.empty()) << op << " " << w;
    return cases.at(0);
  };
  TC_EXPECT_ERROR(check_cpu_stand_in_work(one("fused_moe", "race-performance-1")), ErrorKind::kInvalidArgument,
                  "fused_moe", "'race-performance-1'", "flops", "--backend cpu");
  TC_EXPECT_ERROR(check_cpu_stand_in_work(one("moe_grouped_gemm", "race-case1-gateup")), ErrorKind::kInvalidArgument,
                  "moe_grouped_gemm", "'race-case1-gateup'", "CPU backend standing in");
  EXPECT_NO_THROW(check_cpu_stand_in_work(one("fused_moe", "race-like-small")));
  EXPECT_NO_THROW(check_cpu_stand_in_work(one("moe_grouped_gemm", "small-uniform")));
  EXPECT_NO_THROW(check_cpu_stand_in_work(one("moe_reduce_fused", "deepseek-v3-prefill")));  // big, but cheap
  const auto sym = planning_symbols(one("moe_grouped_gemm", "race-case1-gateup"));
  EXPECT_DOUBLE_EQ(sym.at("used_rows"), 32768.0 * 4);
  // The stand-in keeps every smoke case (what `make run` runs without a GPU),
  // and the host fits each of them.
  Selection smoke;
  smoke.tag = "smoke";
  for (const Case& c : select_cases(m, smoke, storage)) {
    EXPECT_NO_THROW(check_cpu_stand_in_work(c)) << c.id();
    EXPECT_NO_THROW(check_case_fits(c, DeviceType::kCPU)) << c.id();
  }
}

// A matrix (workloads as the product of axes over fixed fields) of odd
// shape is refused naming the file and the field, never by a YAML library
// exception (InputFuzz found `fixed: per_expert`).
TEST(Manifest, MatricesOfOddShapeAreRefused) {
  const std::string dir = test::temp_dir("manifest_matrix");
  auto with_matrix = [&](const std::string& name, const std::string& matrix) {
    std::string text = kMiniOp;
    text.replace(text.find("flags_typo: 1, "), 15, "");
    return write(dir, name, text + "    matrices:\n" + matrix);
  };
  Manifest ok;
  ok.merge_file(with_matrix("ok.yaml", "      - {prefix: m, fixed: {}, axes: {N: [4, 8]}}\n"));
  ASSERT_NE(ok.find("mini"), nullptr);
  EXPECT_NE(ok.find("mini")->workload("m-N4"), nullptr);
  EXPECT_NE(ok.find("mini")->workload("m-N8"), nullptr);
  TC_EXPECT_ERROR(Manifest().merge_file(with_matrix("fixed.yaml", "      - {prefix: m, fixed: per_expert, axes: {N: [4]}}\n")),
                  ErrorKind::kManifest, "fixed.yaml", "matrices[0].fixed", "mapping");
  TC_EXPECT_ERROR(Manifest().merge_file(with_matrix("nested.yaml", "      - {prefix: m, axes: {N: [4, [1, 2]]}}\n")),
                  ErrorKind::kManifest, "nested.yaml", "axes.N[1]");
  TC_EXPECT_ERROR(Manifest().merge_file(with_matrix("deep.yaml", "      - {prefix: m, axes: {N: [{N: [1]}]}}\n")),
                  ErrorKind::kManifest, "deep.yaml", "axes.N[0]");
  TC_EXPECT_ERROR(Manifest().merge_file(with_matrix("scalar.yaml", "      per_expert\n")), ErrorKind::kManifest,
                  "scalar.yaml", "matrices", "list");
}

TEST(Manifest, UserWorkloadsMergeAndValidate) {
  std::string dir = test::temp_dir("manifest_user");
  std::string good = write(dir, "mine.yaml",
                           "workloads:\n  moe_reduce_fused:\n"
                           "    - {name: my-model, T: 300, K: 4, H: 3072, dtype: fp16, tags: [mine]}\n");
  Manifest m = Manifest::load({good});
  const WorkloadSpec* w = m.find("moe_reduce_fused")->workload("my-model");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->symbols.at("experts"), 256);  // op default filled in
  std::string bad = write(dir, "bad.yaml",
                          "workloads:\n  moe_reduce_fused:\n    - {name: x, T: 3, K: 4, H: 8, dtype: int32}\n");
  TC_EXPECT_ERROR(Manifest::load({bad}), ErrorKind::kManifest, "bad.yaml", "workload 'x'", "int32");
  std::string unknown_op = write(dir, "unk.yaml", "workloads:\n  nope:\n    - {name: x}\n");
  TC_EXPECT_ERROR(Manifest::load({unknown_op}), ErrorKind::kManifest, "unk.yaml", "no op named 'nope'");
}

TEST(Manifest, ShapeFlag) {
  Manifest m = Manifest::load();
  const OpSpec& op = *m.find("moe_reduce_fused");
  WorkloadSpec w = parse_shape_workload(op, "T=777,K=6,H=5120,dtype=bf16");
  EXPECT_EQ(w.symbols.at("T"), 777);
  EXPECT_EQ(w.symbols.at("K"), 6);
  EXPECT_EQ(w.dtype, "bf16");
  TC_EXPECT_ERROR(parse_shape_workload(op, "T=1,Q=2,K=1,H=8,dtype=bf16"), ErrorKind::kInvalidArgument, "Q");
  TC_EXPECT_ERROR(parse_shape_workload(op, "T=1,K=1,H=8,dtype=int8"), ErrorKind::kInvalidArgument, "int8");
  TC_EXPECT_ERROR(parse_shape_workload(op, "T=abc,K=1,H=8,dtype=bf16"), ErrorKind::kInvalidArgument, "T");
  TC_EXPECT_ERROR(parse_shape_workload(op, "T1,K=1"), ErrorKind::kInvalidArgument, "--shape", "T1");
}

// A workload's pinned config overrides: in a --shape string ("k=N;k=N"),
// in YAML (the same string or a mapping); merged with --config for every
// run of the case, a key both give with another value refused by name.
TEST(Manifest, WorkloadConfigIsParsedAndMergedWithTheFlag) {
  Manifest m = Manifest::load();
  const OpSpec& op = *m.find("moe_reduce_fused");
  const WorkloadSpec w = parse_shape_workload(op, "T=77,K=6,H=512,dtype=bf16,config=vec=4;block=64");
  EXPECT_EQ(w.config, (std::map<std::string, int>{{"vec", 4}, {"block", 64}}));
  EXPECT_EQ(w.symbols.at("H"), 512);  // the pairs after it still parse
  TC_EXPECT_ERROR(parse_shape_workload(op, "T=1,K=1,H=8,config=vec"), ErrorKind::kInvalidArgument, "config",
                  "KEY=INTEGER", "'vec'");
  TC_EXPECT_ERROR(parse_shape_workload(op, "T=1,K=1,H=8,config=vec=x"), ErrorKind::kInvalidArgument, "config",
                  "'vec=x'");
  TC_EXPECT_ERROR(parse_shape_workload(op, "T=1,K=1,H=8,config=vec=2;vec=4"), ErrorKind::kInvalidArgument,
                  "'vec' given twice");

  const std::string dir = test::temp_dir("manifest_config");
  const std::string file = write(dir, "pinned.yaml",
                                 "workloads:\n  moe_reduce_fused:\n"
                                 "    - {name: pinned-a, T: 30, K: 2, H: 256, dtype: fp16, config: 'items=2;block=64'}\n"
                                 "    - {name: pinned-b, T: 30, K: 2, H: 256, dtype: fp16, config: {items: 3}}\n");
  Manifest mine = Manifest::load({file});
  EXPECT_EQ(mine.find("moe_reduce_fused")->workload("pinned-a")->config,
            (std::map<std::string, int>{{"items", 2}, {"block", 64}}));
  EXPECT_EQ(mine.find("moe_reduce_fused")->workload("pinned-b")->config, (std::map<std::string, int>{{"items", 3}}));

  Case c{&op, &op.variants.front(), &w, 1};
  RunOptions o;
  o.config = {{"items", 2}, {"vec", 4}};
  EXPECT_EQ(with_workload_config(c, o).config, (std::map<std::string, int>{{"items", 2}, {"vec", 4}, {"block", 64}}));
  o.config = {{"vec", 8}};
  TC_EXPECT_ERROR(with_workload_config(c, o), ErrorKind::kInvalidArgument, "moe_reduce_fused", "--config",
                  "vec=4", "vec=8");
}

// allclose tolerances per output dtype (the layer's bf16), and their errors.
TEST(Manifest, TolerancePerDtype) {
  const Manifest m = Manifest::load();  // (a reference into a temporary's ops read freed memory: flaky)
  const OpSpec& layer = *m.find("fused_moe");
  const Tolerance fp16 = layer.tolerance.for_dtype(DType::kF16), bf16 = layer.tolerance.for_dtype(DType::kBF16);
  EXPECT_EQ(fp16.atol, 1e-2);  // the race's check
  EXPECT_EQ(fp16.rtol, 1e-2);
  EXPECT_GT(bf16.atol, fp16.atol);
  EXPECT_GT(bf16.rtol, fp16.rtol);
  EXPECT_EQ(bf16.mode, "allclose");

  std::string dir = test::temp_dir("manifest_tol");
  auto with_tol = [&](const std::string& name, const std::string& tol) {
    std::string text = kMiniOp;
    text.replace(text.find("flags_typo: 1, "), 15, "");
    text += "    tolerance: " + tol + "\n";
    return write(dir, name, text);
  };
  Manifest ok;
  ok.merge_file(with_tol("ok.yaml", "{mode: allclose, atol: 0.1, rtol: 0.2, by_dtype: {fp16: {atol: 1, rtol: 2}}}"));
  const Tolerance& t = ok.find("mini")->tolerance;
  EXPECT_EQ(t.for_dtype(DType::kF16).atol, 1);
  EXPECT_EQ(t.for_dtype(DType::kF16).rtol, 2);
  EXPECT_EQ(t.for_dtype(DType::kF32).atol, 0.1);
  EXPECT_EQ(t.for_dtype(DType::kF32).rtol, 0.2);
  TC_EXPECT_ERROR(
      Manifest().merge_file(with_tol("bitwise.yaml", "{mode: bitwise, by_dtype: {fp16: {atol: 1, rtol: 1}}}")),
      ErrorKind::kManifest, "tolerance.by_dtype", "allclose");
  TC_EXPECT_ERROR(
      Manifest().merge_file(with_tol("int.yaml", "{mode: allclose, by_dtype: {int32: {atol: 1, rtol: 1}}}")),
      ErrorKind::kManifest, "by_dtype.int32", "float dtype");
  TC_EXPECT_ERROR(Manifest().merge_file(with_tol("key.yaml", "{mode: allclose, by_dtype: {bf16: {atol: 1, rtl: 1}}}")),
                  ErrorKind::kManifest, "by_dtype.bf16", "rtl");
  TC_EXPECT_ERROR(Manifest().merge_file(with_tol("miss.yaml", "{mode: allclose, by_dtype: {bf16: {atol: 1}}}")),
                  ErrorKind::kManifest, "by_dtype.bf16", "rtol");
}

// Error bounds below a dtype's normal range need its subnormal spacing.
TEST(DTypeSteps, SubnormalStep) {
  EXPECT_EQ(subnormal_step(DType::kF16), std::ldexp(1.0, -24));
  EXPECT_EQ(subnormal_step(DType::kBF16), std::ldexp(1.0, -133));
  EXPECT_EQ(subnormal_step(DType::kF32), std::ldexp(1.0, -149));
  EXPECT_EQ(conv::f16_to_f32(1), float(subnormal_step(DType::kF16)));  // the smallest positive fp16
  EXPECT_EQ(conv::bf16_to_f32(1), float(subnormal_step(DType::kBF16)));
}

// Half the spacing around a value, from the normal range down through the
// subnormals; rounding to nearest errs by at most that.
TEST(DTypeSteps, HalfUlp) {
  EXPECT_EQ(half_ulp(DType::kF16, 0.75), std::ldexp(1.0, -12));
  EXPECT_EQ(half_ulp(DType::kF16, -0.5), std::ldexp(1.0, -12));
  EXPECT_EQ(half_ulp(DType::kF16, 0.4999), std::ldexp(1.0, -13));
  EXPECT_EQ(half_ulp(DType::kF16, 1e-6), subnormal_step(DType::kF16) / 2);
  EXPECT_EQ(half_ulp(DType::kF16, std::ldexp(1.0, -14)), subnormal_step(DType::kF16) / 2);  // least normal
  EXPECT_EQ(half_ulp(DType::kF16, 0), subnormal_step(DType::kF16) / 2);
  EXPECT_EQ(half_ulp(DType::kBF16, 3.0), std::ldexp(1.0, -7));
  EXPECT_EQ(half_ulp(DType::kBF16, 1e-40), subnormal_step(DType::kBF16) / 2);
  EXPECT_EQ(half_ulp(DType::kF32, 1.0), std::ldexp(1.0, -24));
  EXPECT_EQ(half_ulp(DType::kI32, 5.0), 0.0);
  // Every fp16 rounding of a random value, subnormals among them, is within it.
  for (int i = 0; i < 100000; ++i) {
    const double v = std::ldexp(double(i % 977 + 1) / 977.0, -(i % 30));
    const double r = conv::f16_to_f32(conv::f32_to_f16(float(v)));
    EXPECT_LE(std::fabs(r - double(float(v))), half_ulp(DType::kF16, float(v))) << v;
  }
}
