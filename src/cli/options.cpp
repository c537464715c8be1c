#include "options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "tilecraft/error.h"
#include "tilecraft/harness/random_shapes.h"
#include "tilecraft/harness/report.h"
#include "tilecraft/jit/embedded_sources.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::cli {

harness::Selection Options::selection() const {
  harness::Selection s;
  s.op = op;
  s.variant = variant;
  s.workload = workload;
  s.tag = tag;
  s.shapes = shapes;
  s.seed = seed;
  if (random != 0) {
    if (op.empty())
      throw Error(ErrorKind::kInvalidArgument, "--random: expected --op naming the op to draw shapes for, got none");
    if (!workload.empty() || !tag.empty())
      throw Error(ErrorKind::kInvalidArgument,
                  "--random: expected no --workload or --tag beside it (it selects its own workloads), got " +
                      (workload.empty() ? "--tag " + tag : "--workload " + workload));
    std::vector<std::string> drawn = harness::random_shapes(op, seed, random);
    if (random_config) drawn = harness::with_random_configs(op, std::move(drawn), seed);
    for (auto& text : drawn) s.shapes.push_back(text);
  } else if (random_config) {
    throw Error(ErrorKind::kInvalidArgument,
                "--random-config: expected --random N beside it (it adds overrides to those draws), got none");
  }
  return s;
}

namespace {

// Each value of `flag` is KEY=INTEGER or a comma-separated list of them;
// anything after the integer is an error (stoi alone would accept "2,x=1").
// All values merge into one set; a key given twice with different values is
// an error (which one was meant?). (--vs-config parses each of its values
// apart: each is one A/B side.)
std::map<std::string, int> parse_config(const std::vector<std::string>& lists, const char* flag) {
  std::map<std::string, int> r;
  for (auto& list : lists) {
    size_t start = 0;
    while (start <= list.size()) {
      const size_t end = std::min(list.find(',', start), list.size());
      const std::string kv = list.substr(start, end - start);
      const auto eq = kv.find('=');
      size_t used = 0;
      int value = 0;
      try {
        if (eq != std::string::npos && eq > 0) value = std::stoi(kv.substr(eq + 1), &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (eq == std::string::npos || eq == 0 || used == 0 || used != kv.size() - eq - 1)
        throw_arg_error(ErrorKind::kInvalidArgument, "options", flag, "KEY=INTEGER[,KEY=INTEGER...]",
                        "'" + list + "'");
      const std::string key = kv.substr(0, eq);
      if (const auto seen = r.find(key); seen != r.end() && seen->second != value)
        throw_arg_error(ErrorKind::kInvalidArgument, "options", flag,
                        "each key once (all values merge into one set of overrides)",
                        fmt::format("{}={} and {}={}", key, seen->second, key, value));
      r[key] = value;
      start = end + 1;
    }
  }
  return r;
}

}  // namespace

void check_kernel_dir(const std::string& dir, const char* op, const char* flag) {
  TC_CHECK_ARG(std::filesystem::is_directory(dir), op, flag, "a directory of kernel headers (*.cuh)", "'" + dir + "'");
  const std::vector<std::string> differ = jit::params_headers_differing(dir);
  TC_CHECK_ARG(differ.empty(), op, flag,
               "kernel headers whose parameter headers (*params.cuh) equal this build's (compare other layouts by "
               "a config key, or in separate processes)",
               fmt::format("'{}', whose {} differ", dir, fmt::join(differ, ", ")));
}

bool Options::cpu_stand_in() const { return backend.empty() && !rt::driver_available(); }

harness::RunOptions Options::run_options(bool checked) const {
  harness::RunOptions r;
  r.checked = checked && !unchecked;
  r.compile = jit::CompileOptions::parse(compile_options);
  if (!r.compile.kernel_dir.empty()) check_kernel_dir(r.compile.kernel_dir, "options", "--options");
  r.config = parse_config(config, "--config");
  r.device = gpu();
  r.cpu_stand_in = cpu_stand_in();
  return r;
}

std::vector<harness::VsSide> Options::vs_sides() const {
  const size_t nc = vs_config.size(), nk = vs_kernels.size();
  TC_CHECK_ARG(nc == 0 || nk <= 1 || nk == nc, "bench", "--vs-kernels",
               fmt::format("one directory (for every --vs-config side) or {} (one per --vs-config side, in order)", nc),
               fmt::format("{} directories", nk));
  std::vector<harness::VsSide> sides(std::max(nc, nk));
  for (size_t i = 0; i < sides.size(); ++i) {
    if (i < nc) sides[i].config = parse_config({vs_config[i]}, "--vs-config");
    if (nk > 0) sides[i].kernel_dir = vs_kernels[nk == 1 ? 0 : i];
    sides[i].suffix = harness::vs_suffix(i, sides.size());
  }
  return sides;
}

harness::TimingSettings Options::timing() const {
  harness::TimingSettings t;
  t.warmup = warmup;
  t.warmup_ms = warmup_ms;
  t.repeat = repeat;
  t.trials = trials;
  t.hot = hot;
  t.flush = flush;
  return t;
}

void add_manifest_flags(CLI::App* app, Options& o) {
  app->add_option("--manifest", o.manifests, "Extra manifest file(s), merged with the built-in ones")
      ->check(CLI::ExistingFile);
}

void add_filter_flags(CLI::App* app, Options& o) {
  add_manifest_flags(app, o);
  app->add_option("--op", o.op, "Operator name");
  app->add_option("--variant", o.variant, "Variant name");
  app->add_option("--workload", o.workload, "Workload name");
  app->add_option("--tag", o.tag, "Workload tag (default: each op's default tags)");
  app->add_option("--shape", o.shapes,
                  "Ad-hoc workload, e.g. 'T=777,K=6,H=5120,dtype=bf16' (beside --workload / --tag, or alone)");
  app->add_option("--random", o.random,
                  "N seeded random workloads of --op beside any --shape: shapes, dtypes, layouts and routings no "
                  "manifest entry names (the draw follows --seed; each case's name is the --shape that repeats it)");
  app->add_flag("--random-config", o.random_config,
                "Each --random draw also takes 1-3 random kernel config overrides (config=k=N;... in its --shape): "
                "it must pass its golden under them or be refused naming the key");
  app->add_option("--seed", o.seed, "Base seed (each case derives its own, recorded)");
}

CLI::Validator in_range(double lo, double hi, bool integer) {
  auto expected = fmt::format("{} from {} to {}", integer ? "an integer" : "a number", lo, hi);
  return CLI::Validator(
      [lo, hi, integer, expected](std::string& v) -> std::string {
        char* end = nullptr;
        errno = 0;
        double x = integer ? static_cast<double>(std::strtoll(v.c_str(), &end, 10)) : std::strtod(v.c_str(), &end);
        bool parsed = !v.empty() && end == v.c_str() + v.size() && errno == 0 && std::isfinite(x);
        if (parsed && x >= lo && x <= hi) return {};
        return fmt::format("expected {}, got '{}'", expected, v);
      },
      "[" + expected + "]");
}

void check_device(const Options& o, const char* cmd) {
  if (o.device < 0) return;
  TC_CHECK_ARG(o.backend != "cpu", cmd, "--device", "no --device beside --backend cpu (it names a GPU)",
               fmt::format("--device {} with --backend cpu", o.device));
  rt::check_ordinal(o.device, cmd, "--device");
}

void add_device_flag(CLI::App* app, Options& o) {
  app->add_option("--device", o.device,
                  "The GPU to work on, by CUDA ordinal (default 0): cases' tensors, streams, timing, ceilings and "
                  "counters live there")
      ->check(in_range(0, 65535, true));
}

void add_case_timeout_flag(CLI::App* app, Options& o) {
  app->add_option("--case-timeout", o.case_timeout,
                  "Seconds one case may run; past it the process prints TIMEOUT naming the case and exits 1 (a "
                  "kernel that never finishes cannot be recovered in-process); 0, the default: no limit")
      ->check(in_range(0.0, 1e6));
}

void add_compile_flags(CLI::App* app, Options& o) {
  app->add_option("--options", o.compile_options,
                  "Compile option set: release|profile|debug[,maxrregcount=N,fast-math,ftz=0|1,prec-div=0|1,"
                  "prec-sqrt=0|1,fmad=0|1,trace,kernels=DIR] (trace: per-CTA phase stamps of the kernels that have "
                  "them, printed by bench after each case; kernels: compile the kernel headers of DIR, whose "
                  "parameter headers must equal this build's)");
  app->add_option("--config", o.config, "Kernel config override KEY=N (moe_reduce_fused: vec, items, block)");
}

void add_case_flags(CLI::App* app, Options& o) {
  add_filter_flags(app, o);
  add_device_flag(app, o);
  add_compile_flags(app, o);
}

void add_timing_flags(CLI::App* app, Options& o) {
  app->add_option("--warmup", o.warmup, "Warmup iterations (at least)")->check(in_range(0, 100000, true));
  app->add_option("--warmup-ms", o.warmup_ms,
                  "Warmup: go on past --warmup until this much GPU time has passed (default 25)")
      ->check(in_range(0.0, 60000.0));
  app->add_option("--repeat", o.repeat, "Timed iterations per trial")->check(in_range(1, 100000, true));
  app->add_option("--trials", o.trials, "Trials")->check(in_range(1, 1000, true));
  app->add_flag("--hot", o.hot, "No L2 flush between iterations");
  app->add_option("--flush", o.flush,
                  "L2 flush mode: read (default: a read marked evict_last, so that earlier evict_last lines go too, then its lines set back to "
                  "normal priority), "
                  "plain (one normal read: lines marked evict_last survive it) or write (memset)")
      ->check(CLI::IsMember({"read", "plain", "write"}));
  app->add_flag("--remeasure-ceilings", o.remeasure, "Measure the device ceilings again instead of using the cache");
}

}  // namespace tilecraft::cli
