#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "test_util.h"
#include "tilecraft/harness/energy.h"
#include "tilecraft/harness/gpu_state.h"
#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/harness/random.h"
#include "tilecraft/harness/report.h"
#include "tilecraft/harness/runner.h"
#include "tilecraft/harness/timing.h"
#include "tilecraft/harness/trace.h"
#include "tilecraft/jit/compiler.h"
#include "tilecraft/jit/jit.h"

using namespace tilecraft;
using namespace tilecraft::harness;

TEST(Timing, Percentiles) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  TimingStats s = summarize(v);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.median, 50.5);
  EXPECT_NEAR(s.p90, 90.1, 1e-9);
  EXPECT_NEAR(s.p99, 99.01, 1e-9);
  EXPECT_NEAR(s.std, 29.011, 1e-3);
}

// Trace stamps per slot: CTAs that stamped it and min / mean / max in us
// after slot 0's earliest stamp; unstamped slots left out; the earliest
// stamp of all as the origin where the origin slot has none; with launch
// ids, the last launch's stamps only.
TEST(Trace, SlotsSummarisedOverCtas) {
  jit::KernelTrace t;
  t.function = "k", t.config = "cfg", t.ctas = 4, t.slots = 3;
  t.stamps.assign(12, 0);
  auto at = [&](int c, int s) -> unsigned long long& { return t.stamps[size_t(c * 3 + s)]; };
  at(0, 0) = 10000, at(1, 0) = 11000, at(2, 0) = 12000;  // CTA 3 stamped nothing
  at(0, 2) = 15000, at(1, 2) = 19000;
  const auto st = harness::summarize_trace(t);
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].slot, 0);
  EXPECT_EQ(st[0].ctas, 3);
  EXPECT_DOUBLE_EQ(st[0].min_us, 0.0);
  EXPECT_DOUBLE_EQ(st[0].mean_us, 1.0);
  EXPECT_DOUBLE_EQ(st[0].max_us, 2.0);
  EXPECT_EQ(st[1].slot, 2);
  EXPECT_EQ(st[1].ctas, 2);
  EXPECT_DOUBLE_EQ(st[1].min_us, 5.0);
  EXPECT_DOUBLE_EQ(st[1].mean_us, 7.0);
  EXPECT_DOUBLE_EQ(st[1].max_us, 9.0);
  // Origin slot 1 has no stamps: the earliest stamp of all is the origin.
  const auto o1 = harness::summarize_trace(t, 1);
  ASSERT_EQ(o1.size(), 2u);
  EXPECT_DOUBLE_EQ(o1[0].min_us, 0.0);
  // Origin slot 2: slot 0 comes before it (negative times).
  const auto o2 = harness::summarize_trace(t, 2);
  EXPECT_DOUBLE_EQ(o2[0].min_us, -5.0);
  const std::string text = harness::format_trace(t);
  EXPECT_NE(text.find("trace k [cfg]"), std::string::npos) << text;
  EXPECT_NE(text.find("slot  2:    2 CTAs"), std::string::npos) << text;
  EXPECT_EQ(text.find("slot  1"), std::string::npos) << text;
  const nlohmann::json j = harness::trace_json(t);
  EXPECT_EQ(j["function"], "k");
  ASSERT_EQ(j["slots"].size(), 2u);
  EXPECT_EQ(j["slots"][1]["slot"], 2);
  EXPECT_EQ(j["slots"][1]["ctas"], 2);
  EXPECT_DOUBLE_EQ(j["slots"][1]["mean_us"].get<double>(), 7.0);
  // With launch ids: the stamps of the latest stamp's launch alone. Here CTA
  // 3 stamped slots 0 and 1 in an earlier launch (9) and slot 2's CTA 0
  // stamp is from that launch too: all three are left out.
  t.grids.assign(12, 10);
  at(3, 0) = 500, at(3, 1) = 600, t.grids[9] = t.grids[10] = 9;
  t.grids[2] = 9;
  const auto last = harness::summarize_trace(t);
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0].ctas, 3);
  EXPECT_DOUBLE_EQ(last[0].min_us, 0.0);
  EXPECT_EQ(last[1].slot, 2);
  EXPECT_EQ(last[1].ctas, 1);
  EXPECT_DOUBLE_EQ(last[1].min_us, 9.0);
  // Per CTA (with the SMs): CTA 0 slot 0, CTA 1 slots 0 and 2, CTA 2 slot 0.
  t.sms.assign(12, 0);
  t.sms[3] = t.sms[5] = 77;
  const auto rows = harness::trace_ctas(t);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].cta, 1);
  EXPECT_EQ(rows[1].sm, 77);
  EXPECT_EQ(rows[1].slots, (std::vector<int>{0, 2}));
  EXPECT_DOUBLE_EQ(rows[1].us[1], 9.0);
  const std::string lines = harness::format_trace(t, true);
  EXPECT_NE(lines.find("cta    1 sm  77: 0=1.00 2=9.00"), std::string::npos) << lines;
  EXPECT_EQ(lines.find("cta    3"), std::string::npos) << lines;
  EXPECT_EQ(harness::trace_json(t)["ctas"][1]["us"]["2"], 9.0);
  EXPECT_EQ(harness::trace_origin_ns(t), 10000u);
  EXPECT_NE(lines.find("first stamp, 10000 ns)"), std::string::npos) << lines;
  t.sms.clear();
  // Without launch ids every stamp counts (origin CTA 3's 500 ns).
  t.grids.clear();
  const auto all = harness::summarize_trace(t);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].ctas, 4);
  EXPECT_DOUBLE_EQ(all[0].min_us, 0.0);
  EXPECT_DOUBLE_EQ(all[1].min_us, 0.1);
  // Nothing stamped, or a buffer of the wrong size: nothing to summarise.
  t.stamps.assign(12, 0);
  EXPECT_TRUE(harness::summarize_trace(t).empty());
  t.stamps.resize(5, 1);
  EXPECT_TRUE(harness::summarize_trace(t).empty());
}

TEST(Random, DeterministicAndSeedSensitive) {
  HostTensor a(DType::kBF16, {1000}), b(DType::kBF16, {1000}), c(DType::kBF16, {1000});
  fill_uniform(a.view(), 7, 1, -1, 1);
  fill_uniform(b.view(), 7, 1, -1, 1);
  fill_uniform(c.view(), 8, 1, -1, 1);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
  EXPECT_NE(std::memcmp(a.data(), c.data(), a.nbytes()), 0);
  std::set<uint16_t> distinct(a.ptr<uint16_t>(), a.ptr<uint16_t>() + 1000);
  EXPECT_GT(distinct.size(), 200u);  // never zeros, never constant
}

// Each element is its own formula's value, whatever the chunk or thread that
// wrote it (past 2^20 elements the fill runs on several threads, in 4096-value
// chunks); generated_values reads back what the tensor holds.
TEST(Random, FillIsTheFormulaAtEveryElement) {
  const int64_t n = (int64_t(1) << 20) + 4099;
  for (DType t : {DType::kF32, DType::kBF16}) {
    HostTensor a(t, {n});
    fill_uniform(a.view(), 11, 3, -2.f, 0.5f);
    for (int64_t i = 0; i < n; i += (i < 9000 ? 1 : 997)) {
      const float v = std::fma(2.5f, random_unit(11, 3, uint64_t(i)), -2.f);
      const double want = t == DType::kF32 ? double(v) : double(conv::bf16_to_f32(conv::f32_to_bf16(v)));
      ASSERT_EQ(load_as_double(a.data(), t, size_t(i)), want) << dtype_name(t) << " element " << i;
    }
    GeneratedInput g;
    g.dtype = t;
    g.shape = {n};
    g.stream = 3;
    g.lo = -2.f;
    g.hi = 0.5f;
    std::vector<float> back(5000);
    generated_values(g, 11, 4000, 5000, back.data());
    for (int64_t i = 0; i < 5000; ++i)
      ASSERT_EQ(double(back[size_t(i)]), load_as_double(a.data(), t, size_t(4000 + i))) << dtype_name(t) << " " << i;
  }
}

// Parts of a float64 check merged in order: the maxima, the failure count,
// and the first failure of the earliest part that failed; and its elements.
TEST(F64Check, ElementsAndPartsMergedInOrder) {
  F64Check c, clean, late, later;
  clean.max_abs_err = 0.5;
  clean.max_excess = 0.25;
  late.max_abs_err = 0.125;
  late.max_excess = 3;
  late.num_failed = 2;
  late.first_failed = 40;
  later.max_excess = 7;
  later.num_failed = 1;
  later.first_failed = 10;
  for (const F64Check* p : {&clean, &late, &later}) c.merge(*p);
  EXPECT_EQ(c.max_abs_err, 0.5);
  EXPECT_EQ(c.max_excess, 7);
  EXPECT_EQ(c.num_failed, 3);
  EXPECT_EQ(c.first_failed, 40);

  F64Check e;  // elements: at the bound passes, past it or NaN fails
  e.add(0.5, 0.5, 0);
  e.add(0.25, 1, 1);
  EXPECT_EQ(e.num_failed, 0);
  EXPECT_EQ(e.max_excess, 1);
  e.add(0.75, 0.5, 2);
  e.add(NAN, 1, 3);
  EXPECT_EQ(e.num_failed, 2);
  EXPECT_EQ(e.first_failed, 2);
  EXPECT_EQ(e.max_abs_err, INFINITY);
}

TEST(Generator, RoutingShapesAndRecordedSeeds) {
  auto m = Manifest::load();
  std::deque<WorkloadSpec> storage;
  Selection s;
  s.op = "moe_reduce_fused";
  s.workload = "tk-K9-experts256-ep64-H2048-dtypebf16";
  s.variant = "Quantized";
  auto cases = select_cases(m, s, storage);
  ASSERT_EQ(cases.size(), 1u);
  const OpAdapter& a = adapter_for(cases[0].op->name);
  CaseData d = a.generate(cases[0]);
  const auto& pos = d.inputs.at("token_topk_to_pos");
  const int64_t T = pos.shape()[0], K = pos.shape()[1], E = d.inputs.at("x").shape()[0];
  EXPECT_EQ(K, 9);
  EXPECT_LT(T, 4001);  // tokens with no local expert were dropped
  EXPECT_GT(T, 100);
  int64_t valid = 0;
  std::vector<int> seen(size_t(E), 0);
  for (int64_t t = 0; t < T; ++t) {
    int row_valid = 0;
    for (int64_t k = 0; k < K; ++k) {
      int32_t p = pos.ptr<int32_t>()[t * K + k];
      ASSERT_GE(p, -1);
      ASSERT_LT(p, E);
      if (p >= 0) { ++valid; ++row_valid; ++seen[size_t(p)]; }
    }
    EXPECT_GT(row_valid, 0);
  }
  EXPECT_EQ(valid, E);  // every expanded row is used exactly once
  for (int v : seen) EXPECT_EQ(v, 1);
  EXPECT_EQ(d.symbols.at("V"), double(valid));
  // Same case, same data.
  CaseData d2 = a.generate(cases[0]);
  EXPECT_EQ(std::memcmp(d2.inputs.at("x").data(), d.inputs.at("x").data(), d.inputs.at("x").nbytes()), 0);
}

TEST(Roofline, BytesFromTheManifest) {
  auto m = Manifest::load();
  const OpSpec& op = *m.find("moe_reduce_fused");
  std::map<std::string, double> sym{{"T", 512}, {"K", 8}, {"H", 7168}, {"E", 4096}, {"V", 4096}, {"elem_bytes", 2}};
  EXPECT_DOUBLE_EQ(op.variant("Base")->bytes.eval(sym), (512.0 * 8 * 7168 + 512 * 7168) * 2 + 8 * 512 * 8);
  EXPECT_DOUBLE_EQ(op.variant("Fp8")->bytes.eval(sym), 512.0 * 8 * 7168 * 2 + 512 * 7168 + 8 * 512 * 8 + 4);
}

// Every kernel every manifest workload needs compiles with NVRTC for sm_90a
// (no GPU needed); none spills registers to local memory. (large: the
// workloads past 2^31 elements, which only a big GPU runs.)
TEST(CompileAll, EveryManifestKernelForSm90a) {
  auto m = Manifest::load();
  std::deque<WorkloadSpec> storage;
  std::set<std::string> seen;
  for (const char* tag : {"smoke", "full", "large"}) {
    Selection s;
    s.tag = tag;
    for (auto& c : select_cases(m, s, storage))
      for (bool checked : {false, true}) {
        RunOptions o;
        o.checked = checked;
        for (auto& spec : adapter_for(c.op->name).kernels(c, o)) {
          if (!seen.insert(spec.name_expression()).second) continue;
          auto k = jit::compile(spec, o.compile, "sm_90a");
          EXPECT_GT(k->cubin.size(), 0u) << spec.config;
          EXPECT_EQ(k->resources.spill_store_bytes, 0) << spec.config;
        }
      }
  }
  EXPECT_GT(seen.size(), 50u);
}

// The harness's own kernels (ceilings, the L2 flush's passes, the empty
// kernel) are compiled only when a GPU run first needs them: here they
// compile for both targets, the flush passes with their L2 eviction
// policies on sm_90a.
TEST(Harness, HarnessKernelsCompile) {
  const std::vector<jit::KernelSpec> specs = {
      {"harness/bandwidth.cuh", "tc::harness::copy_kernel", {"4"}, "copy"},
      {"harness/bandwidth.cuh", "tc::harness::read_kernel", {"4"}, "read"},
      {"harness/bandwidth.cuh", "tc::harness::flush_read_last_kernel", {"4"}, "flush, evict_last pass"},
      {"harness/bandwidth.cuh", "tc::harness::flush_normal_kernel", {}, "flush, back to normal"},
      {"harness/bandwidth.cuh", "tc::harness::empty_kernel", {}, "empty"}};
  for (const auto& spec : specs)
    for (const char* arch : {"sm_90a", "sm_80"}) {
      SCOPED_TRACE(spec.config + " " + arch);
      const auto k = jit::compile(spec, {}, arch);
      EXPECT_GT(k->cubin.size(), 0u);
    }
  // The flush's passes carry their L2 policies.
  const jit::KernelSpec last{"harness/bandwidth.cuh", "tc::harness::flush_read_last_kernel", {"4"}, "last"};
  const std::string ptx_last = jit::nvrtc_compile(last, {}, "compute_90a").binary;
  EXPECT_NE(ptx_last.find("L2::evict_last"), std::string::npos);
  EXPECT_NE(ptx_last.find("L2::cache_hint"), std::string::npos);
  const jit::KernelSpec normal{"harness/bandwidth.cuh", "tc::harness::flush_normal_kernel", {}, "normal"};
  EXPECT_NE(jit::nvrtc_compile(normal, {}, "compute_90a").binary.find("applypriority.global.L2::evict_normal"),
            std::string::npos);
}

TEST(Reports, JsonlCsvMarkdown) {
  std::string dir = test::temp_dir("reports");
  Records recs = {{{"case_id", "a/b/c"}, {"status", "pass"}, {"timing", {{"median_us", 1.5}}}, {"note", "x,\"y\""}},
                  {{"case_id", "a/b/d"}, {"status", "fail"}, {"error", "bad"}}};
  write_jsonl(dir + "/r.jsonl", recs);
  write_csv(dir + "/r.csv", recs);
  std::ifstream j(dir + "/r.jsonl"), c(dir + "/r.csv");
  std::string line;
  int n = 0;
  while (std::getline(j, line)) EXPECT_EQ(nlohmann::json::parse(line)["case_id"], recs[size_t(n++)]["case_id"]);
  EXPECT_EQ(n, 2);
  std::getline(c, line);
  EXPECT_NE(line.find("timing.median_us"), std::string::npos);
  std::getline(c, line);
  EXPECT_NE(line.find("\"x,\"\"y\"\"\""), std::string::npos);
  EnvInfo env;
  std::string md = correctness_report(env, recs, "");
  EXPECT_NE(md.find("1 passed, 1 failed, 0 errors**"), std::string::npos) << md;
  recs.push_back({{"case_id", "a/b/e"}, {"status", "error"}, {"refused", true}, {"error", "op: argument 'x'"}});
  md = correctness_report(env, recs, "");
  EXPECT_NE(md.find("1 passed, 1 failed, 0 errors, 1 refused"), std::string::npos) << md;
}

// Composite ops' scopes reach the performance report, one row each, errors named.
TEST(Reports, PerformanceReportListsScopes) {
  nlohmann::json r{{"case_id", "fused_moe/Default/x"},
                   {"scope", "cached_e2e: the whole layer"},
                   {"timing", {{"median_us", 100.0}, {"p90_us", 101.0}}},
                   {"tflops", 300.0}};
  r["scopes"].push_back({{"name", "official_e2e"}, {"note", "race boundary"}, {"timing", {{"median_us", 120.0}}}});
  r["scopes"].push_back({{"name", "cublas_dense"}, {"note", "baseline"}, {"error", "cuBLAS missing"}});
  std::string md = performance_report(EnvInfo{}, nullptr, {r}, "");
  EXPECT_NE(md.find("## Scopes"), std::string::npos) << md;
  EXPECT_NE(md.find("| fused_moe/Default/x | cached_e2e | 100.00"), std::string::npos) << md;
  EXPECT_NE(md.find("| | official_e2e | 120.00"), std::string::npos) << md;
  EXPECT_NE(md.find("ERROR cuBLAS missing"), std::string::npos) << md;
}

// A scope judged against another (TimedScope::vs) shows its median over the
// other's, and TFLOP/s show as a share of the run's GEMM ceiling; a missing
// or failed comparison scope is said so, not divided by.
TEST(Reports, PerformanceReportComparesScopes) {
  nlohmann::json r{{"case_id", "fused_moe/Default/y"},
                   {"scope", "cached_e2e: the whole layer"},
                   {"timing", {{"median_us", 100.0}}},
                   {"tflops", 400.0}};
  r["scopes"].push_back({{"name", "kernel_only"},
                         {"note", "GEMMs"},
                         {"vs", "cublas_per_expert"},
                         {"timing", {{"median_us", 90.0}}},
                         {"tflops", 600.0}});
  r["scopes"].push_back({{"name", "cublas_per_expert"}, {"note", "loop"}, {"timing", {{"median_us", 80.0}}}});
  r["scopes"].push_back({{"name", "experts"}, {"note", "e"}, {"vs", "cublas_dense"}, {"timing", {{"median_us", 95.0}}}});
  r["scopes"].push_back({{"name", "cublas_dense"}, {"note", "baseline"}, {"error", "cuBLAS missing"}});
  Ceilings ce;
  ce.gemm_tflops = 800;
  std::string md = performance_report(EnvInfo{}, &ce, {r}, "");
  EXPECT_NE(md.find("| | kernel_only | 90.00 | - | 600.0 | 75.0% | 1.12x cublas_per_expert | GEMMs |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| fused_moe/Default/y | cached_e2e | 100.00 | - | 400.0 | 50.0% | - |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("- (cublas_dense not timed)"), std::string::npos) << md;
  EXPECT_DOUBLE_EQ(scope_vs_ratio(r, r["scopes"][0]), 90.0 / 80.0);
  EXPECT_EQ(scope_vs_ratio(r, r["scopes"][2]), 0) << "cublas_dense failed: no ratio";
  EXPECT_EQ(scope_vs_ratio(r, r["scopes"][1]), 0) << "no vs";
  // bench --vs-config's lines: the main line's against the record's own.
  const nlohmann::json main_b{{"name", "main@vs"}, {"vs", "main"}, {"timing", {{"median_us", 97.0}}}};
  EXPECT_DOUBLE_EQ(scope_vs_ratio(r, main_b), 0.97);
  EXPECT_TRUE(is_vs_config_scope(main_b));
  EXPECT_FALSE(is_vs_config_scope(r["scopes"][0]));
  EXPECT_FALSE(is_vs_config_scope(nlohmann::json{{"name", "@vs"}}));
  EXPECT_TRUE(is_vs_config_scope(nlohmann::json{{"name", "down@vs2"}}));  // one of several sides
  EXPECT_FALSE(is_vs_config_scope(nlohmann::json{{"name", "down@vs2x"}}));
  EXPECT_EQ(vs_suffix(0, 1), "@vs");
  EXPECT_EQ(vs_suffix(0, 3), "@vs1");
  EXPECT_EQ(vs_suffix(2, 3), "@vs3");
  EXPECT_TRUE(vs_sides_verified(nlohmann::json::object()));  // no other side
  EXPECT_TRUE(vs_sides_verified({{"vs_sides", {{{"verified", true}}, {{"verified", true}}}}}));
  EXPECT_FALSE(vs_sides_verified({{"vs_sides", {{{"verified", true}}, {{"verified", false}}}}}));
  r["scopes"].push_back(main_b);  // the report gives such a line three decimals
  EXPECT_NE(performance_report(EnvInfo{}, nullptr, {r}, "").find("| | main@vs | 97.00 | - | - | - | 0.970x main |"),
            std::string::npos);
  md = performance_report(EnvInfo{}, nullptr, {r}, "");  // no ceilings: no shares
  EXPECT_NE(md.find("| | kernel_only | 90.00 | - | 600.0 | - | 1.12x cublas_per_expert |"), std::string::npos) << md;
}

// The clock/power record around timed rounds: reason names, the deltas, when
// a run counts as slowed, and a clear reason where NVML or the GPU is absent.
TEST(GpuState, ReasonNames) {
  EXPECT_EQ(clock_reason_names(0), "none");
  EXPECT_EQ(clock_reason_names(0x4), "sw power cap");
  EXPECT_EQ(clock_reason_names(0x44), "sw power cap, hw thermal slowdown");
  EXPECT_EQ(clock_reason_names(0x1), "idle");
  EXPECT_EQ(clock_reason_names(0x1000 | 0x8), "hw slowdown, bits 0x1000");
}

TEST(GpuState, DeltaAndSlowed) {
  GpuCounters a, b;
  a.wall_ns = 1'000'000'000, b.wall_ns = 2'500'000'000;  // 1.5 s
  a.energy_mj = 10'000, b.energy_mj = 910'000;             // 900 J
  b.power_mw = 655'000, b.power_limit_mw = 700'000;
  a.power_violation_ns = 5'000'000, b.power_violation_ns = 5'000'000;
  a.thermal_violation_ns = 0, b.thermal_violation_ns = 0;
  b.sm_clock_mhz = 1980, b.max_sm_clock_mhz = 1980, b.temperature_c = 61, b.clock_event_reasons = 0;
  GpuStateDelta d = gpu_state_delta(a, b);
  EXPECT_DOUBLE_EQ(d.seconds, 1.5);
  ASSERT_TRUE(d.avg_power_w.has_value());
  EXPECT_DOUBLE_EQ(*d.avg_power_w, 600.0);
  EXPECT_DOUBLE_EQ(d.energy_j.value(), 900.0);
  EXPECT_DOUBLE_EQ(d.power_w_end.value(), 655.0);
  EXPECT_DOUBLE_EQ(d.power_limit_w.value(), 700.0);
  EXPECT_NE(d.summary().find("power limit 700 W"), std::string::npos) << d.summary();
  EXPECT_DOUBLE_EQ(d.to_json()["power_limit_w"].get<double>(), 700.0);
  EXPECT_DOUBLE_EQ(d.power_held_ms.value(), 0.0);
  EXPECT_FALSE(d.slowed());
  b.power_violation_ns = 17'500'000;  // 12.5 ms held back by the power policy
  d = gpu_state_delta(a, b);
  EXPECT_DOUBLE_EQ(d.power_held_ms.value(), 12.5);
  EXPECT_TRUE(d.slowed());
  const nlohmann::json j = d.to_json();
  EXPECT_TRUE(j["slowed"].get<bool>());
  EXPECT_NE(j["summary"].get<std::string>().find("12.5 ms by power"), std::string::npos) << j.dump();
  b.power_violation_ns = 5'000'000, b.sm_clock_mhz = 1755;  // busy, 11% below the maximum
  EXPECT_TRUE(gpu_state_delta(a, b).slowed());
  b.clock_event_reasons = 0x1;  // idle at the reading: its clock says nothing
  EXPECT_FALSE(gpu_state_delta(a, b).slowed());
  GpuCounters shortb = b;  // under a second: the energy counter's steps would be the average
  shortb.wall_ns = a.wall_ns + 400'000'000, shortb.energy_mj = *a.energy_mj + 240'000;
  d = gpu_state_delta(a, shortb);
  EXPECT_FALSE(d.avg_power_w.has_value());
  EXPECT_DOUBLE_EQ(d.energy_j.value(), 240.0);  // the advance itself is kept (energy loops use it)
  EXPECT_EQ(d.summary().find("W average"), std::string::npos) << d.summary();
  EXPECT_NE(d.summary().find("655 W at the end"), std::string::npos) << d.summary();
  GpuCounters bare;  // counters NVML did not give: no field, no claim
  bare.wall_ns = a.wall_ns + 1;
  d = gpu_state_delta(a, bare);
  EXPECT_FALSE(d.avg_power_w.has_value());
  EXPECT_FALSE(d.power_w_end.has_value());
  EXPECT_FALSE(d.power_limit_w.has_value());
  EXPECT_EQ(d.summary().find("power limit"), std::string::npos) << d.summary();
  EXPECT_FALSE(d.power_held_ms.has_value());
  EXPECT_FALSE(d.slowed());
}

// The console line of an energy record: joules per call, time alone, the
// flushes taken off, power against the cap, the share held back; or why
// there is none.
TEST(GpuState, EnergySummary) {
  nlohmann::json e{{"calls", 612},          {"seconds", 1.72},          {"ms_per_call", 2.76},
                   {"joules_per_call", 1.94}, {"flush_joules_per_call", 0.0152}, {"avg_power_w", 696.0},
                   {"power_limit_w", 700.0}, {"power_held_ms", 1720.0}};
  const std::string s = energy_summary(e);
  for (const char* want : {"1.94 J/call alone (2.76 ms/call, 612 calls; flushes' 0.0152 J/call taken off), 696 W",
                           "(limit 700)", "held back by power 100% of 1.72 s"})
    EXPECT_NE(s.find(want), std::string::npos) << want << " in " << s;
  e.erase("power_limit_w"), e.erase("power_held_ms");
  EXPECT_EQ(energy_summary(e).find("limit"), std::string::npos) << energy_summary(e);
  EXPECT_EQ(energy_summary(e).find("held back"), std::string::npos) << energy_summary(e);
  EXPECT_EQ(energy_summary({{"calls", 3}, {"unavailable", "no energy counter"}}),
            "energy unavailable: no energy counter");
  EXPECT_EQ(energy_summary(nlohmann::json::object()), "");
}

TEST(GpuState, ReadsOrSaysWhyNot) {
  std::string why;
  const auto c = read_gpu_counters(0, &why);
  if (c) {
    EXPECT_GT(c->wall_ns, 0u);
  } else {
    EXPECT_FALSE(why.empty());
  }
}

TEST(Reports, PerformanceReportNamesCasesTimedBelowFullClock) {
  GpuCounters a, b;
  a.wall_ns = 0, b.wall_ns = 20'000'000;
  a.power_violation_ns = 0, b.power_violation_ns = 3'000'000;
  nlohmann::json held{{"case_id", "fused_moe/Default/held"}, {"timing", {{"median_us", 10.0}}}};
  held["gpu_state"] = gpu_state_delta(a, b).to_json();
  nlohmann::json full{{"case_id", "fused_moe/Default/full"}, {"timing", {{"median_us", 10.0}}}};
  full["gpu_state"] = gpu_state_delta(a, a).to_json();
  std::string md = performance_report(EnvInfo{}, nullptr, {held, full}, "");
  EXPECT_NE(md.find("## Cases timed below full clock"), std::string::npos) << md;
  EXPECT_NE(md.find("| fused_moe/Default/held | GPU over 20 ms"), std::string::npos) << md;
  EXPECT_EQ(md.find("| fused_moe/Default/full | GPU"), std::string::npos) << md;
  md = performance_report(EnvInfo{}, nullptr, {full}, "");
  EXPECT_NE(md.find("No case's clock was held back"), std::string::npos) << md;
  nlohmann::json none{{"case_id", "x"}, {"gpu_state", {{"unavailable", "NVML (libnvidia-ml.so.1) not found"}}}};
  md = performance_report(EnvInfo{}, nullptr, {none}, "");
  EXPECT_NE(md.find("not recorded (NVML (libnvidia-ml.so.1) not found)"), std::string::npos) << md;
}

// A case whose tensors cannot exist (an element count past int64, or a tensor
// larger than the memory it would live in) is refused before anything is
// generated, naming the op, the workload, the tensor and its size; cases
// that fit pass, as do tensors sized by generated data (skipped here).
TEST(Harness, CasesThatCannotFitAreRefused) {
  const Manifest m = Manifest::load();
  auto one_case = [&](const std::string& op, const std::string& shape, std::deque<WorkloadSpec>& storage) {
    Selection s;
    s.op = op;
    s.shapes = {shape};
    return select_cases(m, s, storage).at(0);
  };
  std::deque<WorkloadSpec> storage;
  TC_EXPECT_ERROR(check_case_fits(one_case("fused_moe", "T=4294967296,H=4294967296,I=8,E=2,K=1,dtype=bf16", storage),
                                  DeviceType::kCPU),
                  ErrorKind::kInvalidArgument, "fused_moe", "T=4294967296", "input 'x'", "[4294967296, 4294967296]",
                  "GB");
  TC_EXPECT_ERROR(check_case_fits(one_case("moe_grouped_gemm", "T=4,topk=1,E=2,N=8,K=4611686018427387904,dtype=bf16",
                                           storage),
                                  DeviceType::kCPU),
                  ErrorKind::kInvalidArgument, "moe_grouped_gemm", "input 'a'");
  const Case big = one_case("moe_topk_gate", "T=99999999999,E=256,K=8", storage);
  // A run refuses it in its record (a run of many cases goes on past it).
  const nlohmann::json r = run_correctness(big, DeviceType::kCPU, RunOptions{}, capture_env());
  EXPECT_EQ(r.value("status", ""), "error");
  EXPECT_TRUE(r.value("refused", false));
  for (const char* part : {"moe_topk_gate", "logits", "GB"})
    EXPECT_NE(r.value("error", "").find(part), std::string::npos) << r.dump();
  EXPECT_NO_THROW(check_case_fits(one_case("fused_moe", "T=4096,H=2048,I=768,E=128,K=8,dtype=bf16", storage),
                                  DeviceType::kCPU));
  EXPECT_NO_THROW(check_case_fits(one_case("moe_grouped_gemm", "T=300,topk=2,E=4,N=200,K=136,dtype=bf16", storage),
                                  DeviceType::kCPU));
}

// Records carry each output's hashed bits: two runs of a case record the same
// hashes, another seed (other inputs) other ones.
TEST(Harness, RecordsHashTheOutputBits) {
  const Manifest m = Manifest::load();
  const auto env = capture_env();
  RunOptions o;
  o.checked = true;
  for (const auto& [op, workload] : std::vector<std::pair<std::string, std::string>>{
           {"fused_moe", "race-like-small"}, {"moe_grouped_gemm", "small-uniform"}, {"moe_topk_gate", "deepseek-v3-t16"}}) {
    SCOPED_TRACE(op + " / " + workload);
    std::deque<WorkloadSpec> storage;
    Selection s;
    s.op = op;
    s.workload = workload;
    const Case c = select_cases(m, s, storage).at(0);
    const auto r1 = run_correctness(c, DeviceType::kCPU, o, env), r2 = run_correctness(c, DeviceType::kCPU, o, env);
    ASSERT_EQ(r1.at("status"), "pass") << r1.dump();
    ASSERT_TRUE(r1.contains("output_sha256")) << r1.dump();
    const std::string main_output = op == "moe_topk_gate" ? "ids" : "out";
    ASSERT_EQ(r1.at("output_sha256").at(main_output).get<std::string>().size(), 16u) << r1.dump();
    EXPECT_EQ(r1.at("output_sha256"), r2.at("output_sha256"));
    s.seed = 7;
    const Case other = select_cases(m, s, storage).at(0);
    EXPECT_NE(run_correctness(other, DeviceType::kCPU, o, env).at("output_sha256"), r1.at("output_sha256"));
  }
}
