#pragma once
// Flags shared by the tilecraft subcommands.
#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/harness/runner.h"
#include "tilecraft/harness/timing.h"

namespace tilecraft::cli {

struct Options {
  std::vector<std::string> manifests;
  std::vector<std::string> shapes;
  int random = 0;  // --random N: N seeded random workloads of --op (harness/random_shapes.h)
  bool random_config = false;  // --random-config: each --random draw with random kernel config overrides
  std::string op, variant, workload, tag;
  std::string backend;  // cuda | cpu | "" (cuda when a GPU is present)
  uint64_t seed = 20261129;
  std::string arch;     // "" = the device's, or sm_90a without a GPU
  std::string compile_options = "release";
  std::vector<std::string> config;  // key=value kernel overrides
  std::vector<std::string> vs_config;   // bench: per other A/B side, key=value overrides (vs_sides)
  std::vector<std::string> vs_kernels;  // bench: other A/B sides' kernel header directories (vs_sides)
  std::vector<std::string> scopes;  // bench: time only these scopes of each case (empty: all)
  double energy_ms = 0;             // bench: > 0, each scope's energy per call, run alone this long
  int warmup = 10, repeat = 100, trials = 1;
  double warmup_ms = 25;
  bool hot = false;
  std::string flush = "read";
  bool remeasure = false;
  std::string out = "results";
  std::string dump;     // inspect: source|ptx|sass|resources
  bool unchecked = false;
  int device = -1;  // --device: the CUDA ordinal to work on; -1 = not given (device 0)
  double case_timeout = 0;  // test, bench, run: seconds one case may run before the process exits naming it (0: no limit)

  harness::Selection selection() const;
  // The CPU backend runs because no GPU is usable, not because --backend cpu
  // asked for it (the console says so; model-sized cases are refused).
  bool cpu_stand_in() const;
  harness::RunOptions run_options(bool checked) const;
  // bench's other A/B sides: one per --vs-config value (each parsed as
  // --config is), their kernels from the one --vs-kernels directory if given,
  // or paired in order with as many; or one per --vs-kernels directory alone.
  // Errors name the flag. (The directories are the caller's to check:
  // check_kernel_dir.)
  std::vector<harness::VsSide> vs_sides() const;
  harness::TimingSettings timing() const;
  int gpu() const { return device < 0 ? 0 : device; }  // (check_device first)
};

// --device against this machine: with it given, a GPU must exist (else
// Error(kNoDevice)), the ordinal must be one this process sees and the
// backend must not be the CPU (else a usage error naming `cmd` and the flag).
void check_device(const Options& o, const char* cmd);
// A numeric flag's bounds, checked with a message of this project's own wording
// ("expected a number from LO to HI, got 'V'"; "an integer" with integer set,
// which also refuses "2.5" before CLI11's own "Could not convert"): CLI::Range
// words it differently in each CLI11 version, and the tests read it.
CLI::Validator in_range(double lo, double hi, bool integer = false);

void add_device_flag(CLI::App* app, Options& o);

// Another tree's kernel headers (--options kernels=DIR, bench --vs-kernels):
// a directory whose parameter headers equal this build's, else an error
// naming `flag`: the binary would pass its kernels structs of another layout.
void check_kernel_dir(const std::string& dir, const char* op, const char* flag);

void add_manifest_flags(CLI::App* app, Options& o);
void add_filter_flags(CLI::App* app, Options& o);
void add_compile_flags(CLI::App* app, Options& o);
// What every subcommand that works on cases takes: filters, --device, compile flags.
void add_case_flags(CLI::App* app, Options& o);
void add_timing_flags(CLI::App* app, Options& o);
void add_case_timeout_flag(CLI::App* app, Options& o);  // test, bench, run

}  // namespace tilecraft::cli
