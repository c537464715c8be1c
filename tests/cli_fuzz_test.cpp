// What a user types on the command line must never crash the process: random
// command lines (a subcommand and a few flags drawn from every flag the CLI
// takes, with valid and invalid values, in any order and combination) end
// with exit 0, 2 (a usage error) or 3 (a GPU was named and none is usable),
// never by a signal, never with 1 (every selection here passes its golden)
// or 4 (an internal error), and a nonzero exit says "tilecraft" and what it
// refused. Seeded (TILECRAFT_FUZZ_SEED=N explores other draws); every
// failure prints the command line that repeats it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

struct Flag {
  std::string name;                 // "--op"
  std::vector<std::string> values;  // "" = a bare flag (no value)
  std::vector<std::string> where;   // the subcommands that take it (empty: every one)
};

// Every flag of the CLI (src/cli/app.cpp, options.cpp), with values that
// keep the work small: no value selects more than a tiny workload or a shape
// of a few tokens (the run takes seconds on the CPU backend).
std::vector<Flag> flags(const std::string& out_dir) {
  const std::vector<std::string> cases = {"compile", "test", "bench", "run", "inspect"};
  const std::vector<std::string> timed = {"bench", "run"};
  return {
      {"--op", {"moe_reduce_fused", "moe_topk_gate", "no_such_op"}, {}},
      {"--variant", {"Base", "Default", "NoSuchVariant"}, cases},
      {"--workload", {"tiny", "no-such-workload"}, cases},
      {"--tag", {"no-such-tag"}, {}},
      {"--shape",
       {"'T=5,K=2,H=64,dtype=bf16'", "'T=3,E=8,K=2,dtype=fp32'", "'T=-1,K=2,H=64,dtype=bf16'", "'T=5,,K'",
        "'T=99999999999999999999,K=2,H=8'", "'T=4,K=2,H=64,dtype=bf16,config=vec=8'", "'='"},
       cases},
      {"--random", {"1", "-3", "x"}, cases},
      {"--random-config", {""}, cases},
      {"--seed", {"7", "0", "-1", "18446744073709551615", "abc"}, cases},
      {"--manifest", {"/no/such/manifest.yaml", "/dev/null"}, {}},
      {"--device", {"0", "1", "64", "-1", "x"}, {"env", "compile", "test", "bench", "run", "inspect"}},
      {"--options",
       {"release", "debug", "release,maxrregcount=300", "release,fast-math", "nonsense", "release,kernels=/no/dir",
        "release,ftz=2"},
       cases},
      {"--config", {"vec=4", "vec=3", "bogus=1", "vec", "=1", "vec=4,vec=2", "block_m=64"}, cases},
      {"--backend", {"cpu", "cuda", "tpu"}, {"test", "bench"}},
      {"--unchecked", {""}, {"test"}},
      {"--case-timeout", {"0", "60", "-1", "x"}, {"test", "bench", "run"}},
      {"--warmup", {"1", "0", "-2"}, timed},
      {"--warmup-ms", {"0", "1", "-1"}, timed},
      {"--repeat", {"2", "0"}, timed},
      {"--trials", {"1", "0"}, timed},
      {"--hot", {""}, timed},
      {"--flush", {"read", "plain", "write", "none"}, timed},
      {"--remeasure-ceilings", {""}, timed},
      {"--scopes", {"main", "combine", "no_such_scope", "''"}, {"bench"}},
      {"--energy-ms", {"0", "500", "1000", "-5"}, {"bench"}},
      {"--vs-config", {"vec=4", "vec=4,vec=2", "x"}, {"bench"}},
      {"--vs-kernels", {"/no/such/dir"}, {"bench"}},
      {"--arch", {"sm_90a", "sm_80", "sm_1", "x"}, {"compile", "run", "inspect"}},
      {"--out", {out_dir, "/proc/no-such/dir"}, {"run"}},
      {"--dump", {"source", "resources", "ptx", "nonsense"}, {"inspect"}},
      {"--no-such-flag", {""}, {}},
  };
}

bool takes(const Flag& f, const std::string& sub) {
  if (f.where.empty()) return true;
  for (const auto& w : f.where)
    if (w == sub) return true;
  return false;
}

uint64_t fuzz_seed() {
  const char* s = std::getenv("TILECRAFT_FUZZ_SEED");
  return s && *s ? std::strtoull(s, nullptr, 10) : 20261207;
}

}  // namespace

TEST(CliFuzz, RandomCommandLinesExitCleanly) {
  const uint64_t seed = fuzz_seed();
  std::mt19937_64 rng(seed);
  const std::string out_dir = tilecraft::test::temp_dir("cli_fuzz_out");
  const std::vector<Flag> all = flags(out_dir);
  const std::vector<std::string> subs = {"env", "list", "compile", "test", "bench", "run", "inspect"};
  const auto pick = [&](size_t n) { return size_t(rng() % n); };
  int by_rc[5] = {0, 0, 0, 0, 0};
  constexpr int kLines = 150;
  for (int i = 0; i < kLines; ++i) {
    const std::string sub = subs[pick(subs.size())];
    std::string args = sub;
    // Every line that works on cases selects something small first (a
    // tiny workload, or a shape of the reduce, the cheapest op on the CPU
    // backend); no drawn flag widens it (no tag that selects, no empty
    // name), so the draw's other flags are what gets exercised.
    if (sub != "env" && sub != "list")
      args += pick(2) ? " --op moe_reduce_fused --workload tiny" : " --op moe_reduce_fused --shape 'T=5,K=2,H=64,dtype=fp16'";
    const size_t n = 1 + pick(4);
    for (size_t k = 0; k < n; ++k) {
      const Flag& f = all[pick(all.size())];
      if (!takes(f, sub)) continue;
      const std::string& v = f.values[pick(f.values.size())];
      args += " " + f.name + (v.empty() ? "" : " " + v);
    }
    // Without a GPU the cases run on the CPU; with one, on it (tiny work either way).
    const auto r = tilecraft::test::run_tilecraft(args);
    const std::string repeat = "tilecraft " + args + "  (TILECRAFT_FUZZ_SEED=" + std::to_string(seed) + ")";
    ASSERT_FALSE(r.signaled) << "ended by a signal: " << repeat << "\n" << r.out;
    ASSERT_TRUE(r.rc == 0 || r.rc == 2 || r.rc == 3) << "exit " << r.rc << ": " << repeat << "\n" << r.out;
    // A refusal says what it refused: tilecraft's own errors name the
    // command, the parser's the flag.
    if (r.rc != 0) {
      EXPECT_TRUE(r.out.find("tilecraft") != std::string::npos || r.out.find("--") != std::string::npos)
          << "a refusal that names nothing: " << repeat << "\n" << r.out;
    }
    ++by_rc[r.rc];
  }
  // The draw must reach both outcomes, or it tests less than it claims.
  EXPECT_GT(by_rc[0], 10) << "few command lines ran; seed " << seed;
  EXPECT_GT(by_rc[2], 10) << "few command lines were refused; seed " << seed;
  std::cout << "command lines: " << by_rc[0] << " ran, " << by_rc[2] << " refused (usage), " << by_rc[3]
            << " needed a GPU (seed " << seed << ")\n";
}
