// The tilecraft command line, shared by the `tilecraft` binary and
// `python -m tilecraft`. Exit codes: 0 ok, 1 failures found (tests, compile
// errors), 2 usage error, 3 a GPU was required and none is usable, 4 other errors.
#include <iostream>

#include "commands.h"
#include "tilecraft/error.h"

namespace tilecraft::cli {

int run_main(int argc, char** argv) {
  cli::Options o;
  CLI::App app{"tilecraft: compile, check and measure tile-level GPU kernels for MoE-era LLM inference"};
  app.require_subcommand(1);
  app.set_version_flag("--version", TILECRAFT_VERSION);

  auto* env = app.add_subcommand("env", "Show the GPU, driver, compilers, build and commit");
  cli::add_device_flag(env, o);
  auto* list = app.add_subcommand("list", "List ops, variants, workloads and tags from the manifest");
  cli::add_manifest_flags(list, o);
  list->add_option("--op", o.op, "Only this op");
  list->add_option("--tag", o.tag, "Only workloads with this tag");
  auto* compile = app.add_subcommand("compile", "JIT-compile every kernel the selected workloads need");
  cli::add_case_flags(compile, o);
  compile->add_option("--arch", o.arch, "Target arch (default: the GPU's, or sm_90a without one)");
  auto* test = app.add_subcommand("test", "Check correctness against the golden");
  cli::add_case_flags(test, o);
  cli::add_case_timeout_flag(test, o);
  test->add_option("--backend", o.backend, "cuda or cpu (default: cuda when a GPU is present)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  test->add_flag("--unchecked", o.unchecked, "Run without checked mode (index validation)");
  auto* bench = app.add_subcommand("bench", "Time the selected cases (benchmark protocol) with roofline columns");
  cli::add_case_flags(bench, o);
  cli::add_timing_flags(bench, o);
  cli::add_case_timeout_flag(bench, o);
  bench->add_option("--scopes", o.scopes,
                    "Time only these scopes of each case (comma-separated, e.g. experts,down; the main line always "
                    "runs, and 'main' names it); with --options ...,trace the stamps printed are the last name's, "
                    "run once more after the timing with the L2 flushed (without --scopes: the main line's "
                    "check call, L2 warm)")
      ->delimiter(',');
  bench->add_option("--energy-ms", o.energy_ms,
                    "Also each timed scope's energy per call (the main line as 'main'): after the timing each runs "
                    "alone, back to back, flushed as timed, for at least this many ms of GPU time (0: off; at least "
                    "1000, the energy counter's steps), the flushes' own energy taken off; with the power the loop "
                    "drew and how long the power cap held the clock back")
      ->check(in_range(0.0, 600000.0));
  bench->add_option("--vs-config", o.vs_config,
                    "A/B in one process: also time each case with these kernel config overrides (KEY=N[,KEY=N...], "
                    "applied over --config), one call of each line per round beside the first run's, so every side "
                    "sees the same clock and power state. Each value is one more side (--vs-config a=1 b=2: three "
                    "runs); with one side its lines are named NAME@vs, with several NAME@vs1, NAME@vs2, ...; each "
                    "prints its median over the first run's NAME, and each side's output is verified against the "
                    "golden too");
  bench->add_option("--vs-kernels", o.vs_kernels,
                    "A/B of kernel code in one process: the other side compiles the kernel headers of this "
                    "directory (e.g. .ab_kernels/REV from scripts/kernel_ab.sh); its parameter headers "
                    "(*params.cuh) must equal this build's. One directory applies to every --vs-config side; "
                    "several pair with as many --vs-config values in order, or without --vs-config are one side "
                    "each");
  bench->add_option("--backend", o.backend, "cuda or cpu")->check(CLI::IsMember({"cuda", "cpu"}));
  auto* run = app.add_subcommand("run", "Main job: env, compile, test and bench; writes logs and reports");
  cli::add_case_flags(run, o);
  cli::add_timing_flags(run, o);
  cli::add_case_timeout_flag(run, o);
  run->add_option("--out", o.out, "Results directory (default: results)");
  run->add_option("--arch", o.arch, "Compile target when no GPU is present (default sm_90a)");
  auto* inspect = app.add_subcommand("inspect", "Show a kernel's generated source, PTX, SASS or resources");
  cli::add_case_flags(inspect, o);
  inspect->add_option("--arch", o.arch, "Target arch (default: the GPU's, or sm_90a)");
  inspect->add_option("--dump", o.dump, "source|ptx|sass|resources")
      ->required()
      ->check(CLI::IsMember({"source", "ptx", "sass", "resources"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (*env) return cli::cmd_env(o);
    if (*list) return cli::cmd_list(o);
    if (*compile) return cli::cmd_compile(o);
    if (*test) return cli::cmd_test(o);
    if (*bench) return cli::cmd_bench(o);
    if (*run) return cli::cmd_run(o);
    if (*inspect) return cli::cmd_inspect(o);
  } catch (const Error& e) {
    std::cerr << "tilecraft: " << e.what() << "\n";
    switch (e.kind()) {
      case ErrorKind::kInvalidArgument:
      case ErrorKind::kType:
      case ErrorKind::kManifest: return 2;
      case ErrorKind::kNoDevice: return 3;
      default: return 4;
    }
  } catch (const std::bad_alloc&) {
    std::cerr << "tilecraft: out of memory (host or device) while running the command\n";
    return 4;
  } catch (const std::exception& e) {
    std::cerr << "tilecraft: internal error: " << e.what() << "\n";
    return 4;
  }
  return 0;
}

}  // namespace tilecraft::cli
