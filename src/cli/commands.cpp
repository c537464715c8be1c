#include "commands.h"

#include "case_watchdog.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <set>
#include <thread>

#include "tilecraft/error.h"
#include "tilecraft/harness/ceilings.h"
#include "tilecraft/harness/energy.h"
#include "tilecraft/harness/env.h"
#include "tilecraft/harness/precompile.h"
#include "tilecraft/harness/report.h"
#include "tilecraft/harness/trace.h"
#include "tilecraft/jit/embedded_sources.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::cli {
namespace fs = std::filesystem;
using harness::Case;
using harness::Records;

namespace {

// Console output, optionally copied to a log file (logs/raw/<op>.log).
struct Console {
  std::ofstream file;
  void line(const std::string& s) {
    std::cout << s << "\n" << std::flush;
    if (file) file << s << "\n" << std::flush;
  }
};

struct Progress {
  size_t total;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::string prefix(size_t i) const {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return fmt::format("[{}/{} {:.1f}s]", i + 1, total, s);
  }
};

DeviceType resolve_backend(const Options& o) {
  if (o.backend == "cpu") return DeviceType::kCPU;
  if (o.backend == "cuda") {
    if (!rt::driver_available())
      throw Error(ErrorKind::kNoDevice, "no CUDA device: --backend cuda needs a GPU, but " + rt::driver_unavailable_reason());
    return DeviceType::kCUDA;
  }
  return rt::driver_available() ? DeviceType::kCUDA : DeviceType::kCPU;
}

std::string resolve_arch(const Options& o, const char* cmd) {
  if (!o.arch.empty()) {
    jit::check_arch(o.arch, cmd, "--arch");
    return o.arch;
  }
  return rt::driver_available() ? rt::device_info(o.gpu()).arch() : "sm_90a";
}

struct Selected {
  harness::Manifest manifest;
  std::deque<harness::WorkloadSpec> storage;
  std::vector<Case> cases;
};

std::unique_ptr<Selected> select(const Options& o, harness::Selection s) {
  auto sel = std::make_unique<Selected>();
  sel->manifest = harness::Manifest::load(o.manifests);
  sel->cases = harness::select_cases(sel->manifest, s, sel->storage);
  return sel;
}

std::string shape_summary(const nlohmann::json& r) {
  auto sym = r.value("symbols", nlohmann::json::object());
  std::string s;
  for (const char* k : {"T", "K", "H", "E"})
    if (sym.contains(k)) s += fmt::format("{}{}={}", s.empty() ? "" : ",", k, sym[k].get<double>());
  return s;
}

// Compiles the kernels of `cases` (deduplicated), in parallel; one record each.
Records compile_cases(const std::vector<Case>& cases, const Options& o, const std::string& arch, Console& con) {
  harness::RunOptions ro = o.run_options(false);
  ro.cc_major = jit::arch_cc_major(arch);  // the kernels that arch's GPUs would run
  std::vector<harness::RefusedCase> refused;
  const auto items = harness::precompile(cases, ro, arch, 0, &refused);
  Records recs;
  for (auto& it : items) {
    nlohmann::json r{{"kind", "compile"}, {"op", it.op}, {"config", it.spec.config},
                     {"kernel", it.spec.name_expression()}, {"arch", arch}, {"options", ro.compile.str()}};
    if (const auto& k = it.kernel) {
      r["registers"] = k->resources.registers;
      r["spill_store_bytes"] = k->resources.spill_store_bytes;
      r["spill_load_bytes"] = k->resources.spill_load_bytes;
      r["smem_bytes"] = k->resources.smem_static_bytes;
      r["stack_bytes"] = k->resources.stack_frame_bytes;
      r["code_bytes"] = k->resources.code_bytes;
      r["compile_ms"] = k->compile_ms;
      r["cache"] = k->disk_hit ? "hit" : "miss";
      r["key"] = k->key.substr(0, 16);
      r["status"] = "ok";
    } else {
      r["status"] = "error";
      r["error"] = it.error;
    }
    recs.push_back(r);
  }
  con.line(fmt::format("{:<58} {:>4} {:>6} {:>6} {:>6} {:>6} {:>9} {:>5}", "kernel config", "regs", "spill", "smem",
                       "stack", "instrs", "compile", "cache"));
  int errors = 0;
  for (auto& r : recs) {
    if (r["status"] == "ok")
      con.line(fmt::format("{:<58} {:>4} {:>6} {:>6} {:>6} {:>6} {:>7.1f}ms {:>5}", r["config"].get<std::string>(),
                           r["registers"].get<int>(), r["spill_store_bytes"].get<int>(), r["smem_bytes"].get<int>(),
                           r["stack_bytes"].get<int>(), r["code_bytes"].get<int>() / 16, r["compile_ms"].get<double>(),
                           r["cache"].get<std::string>()));
    else {
      ++errors;
      con.line(fmt::format("{:<58} ERROR {}", r["config"].get<std::string>(), r["error"].get<std::string>()));
    }
  }
  const size_t kernels = recs.size();
  // A case whose config the op refuses (a --config, or a --random-config
  // draw's) has no kernels: it is said, and the others still compile.
  for (auto& rc : refused) {
    con.line(fmt::format("REFUSED {}: {}", rc.case_id, rc.error));
    recs.push_back({{"kind", "compile"}, {"op", rc.op}, {"case_id", rc.case_id}, {"arch", arch},
                    {"options", ro.compile.str()}, {"status", "refused"}, {"refused", true}, {"error", rc.error}});
  }
  const std::string refusals =
      refused.empty() ? "" : fmt::format(", {} case{} refused", refused.size(), refused.size() == 1 ? "" : "s");
  con.line(fmt::format("{} kernels for {} ({} errors){}, cache dir {}", kernels, arch, errors, refusals,
                       jit::disk_cache_enabled() ? jit::cache_dir() : "disabled"));
  return recs;
}

// The cases' kernels compiled up front on all cores (a fresh machine would
// otherwise compile them one by one as the cases reach them). `tilecraft
// run` has its own compile step and does not need this.
void precompile_for_gpu(const std::vector<Case>& cases, DeviceType backend, const Options& o, Console& con) {
  if (backend != DeviceType::kCUDA) return;
  const auto t0 = std::chrono::steady_clock::now();
  const auto items = harness::precompile(cases, o.run_options(false), rt::device_info(o.gpu()).arch());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (s > 1.0) con.line(fmt::format("compiled {} kernels in {:.1f} s", items.size(), s));
}

// A case whose shape or option an op refused (record "refused") is the
// user's argument, not a failure.
bool refused(const nlohmann::json& r) { return r.value("refused", false); }

// The exit status of test, bench and run: 1 if a case failed (a wrong or
// failed result, a kernel that did not compile), else 2 if an op refused a
// case's arguments, else 0.
int exit_status(std::initializer_list<const Records*> sets) {
  bool any_refused = false;
  for (const Records* recs : sets)
    for (auto& r : *recs) {
      const std::string st = r.value("status", "");
      if (st == "ok" || st == "pass") continue;
      if (!refused(r)) return 1;
      any_refused = true;
    }
  return any_refused ? 2 : 0;
}

Records test_cases(const std::vector<Case>& cases, DeviceType backend, const Options& o, const harness::EnvInfo& env,
                   Console& con) {
  Records recs;
  Progress p{cases.size()};
  int passed = 0, failed = 0, refusals = 0;
  auto ro = o.run_options(true);
  for (size_t i = 0; i < cases.size(); ++i) {
    nlohmann::json r;
    {
      const CaseWatchdog watch(o.case_timeout, cases[i].id(), backend == DeviceType::kCUDA);
      r = harness::run_correctness(cases[i], backend, ro, env);
    }
    r["kind"] = "correctness";
    const bool ok = r["status"] == "pass", no = !ok && refused(r);
    ++(ok ? passed : no ? refusals : failed);
    std::string detail = ok ? fmt::format("{} elements, max abs err {:.3g}", r.value("num_elements", 0),
                                          r.value("max_abs_err", 0.0))
                            : r.value("error", std::string("failed"));
    con.line(fmt::format("{} {:<4} {} [{}] {} seed={} {}", p.prefix(i),
                         ok   ? "PASS"
                         : no ? "REFUSED"
                              : "FAIL",
                         r["case_id"].get<std::string>(), r["backend"].get<std::string>(), shape_summary(r),
                         r["seed"].get<uint64_t>(), detail));
    recs.push_back(std::move(r));
  }
  con.line(fmt::format("{} passed, {} failed", passed, failed) +
           harness::refused_note(refusals));
  return recs;
}

Records bench_cases(const std::vector<Case>& cases, DeviceType backend, const Options& o, const harness::EnvInfo& env,
                    const harness::TimingSettings& timing, Console& con, std::optional<harness::Ceilings>& ceilings) {
  harness::BenchContext ctx;
  ctx.timing = timing;
  ctx.scopes = o.scopes;
  TC_CHECK_ARG(o.energy_ms == 0 || o.energy_ms >= harness::kMinEnergyMs, "bench", "--energy-ms",
               fmt::format("0 (off) or at least {:.0f} ms (the energy counter advances in steps too coarse for less)",
                           harness::kMinEnergyMs),
               fmt::format("{:g}", o.energy_ms));
  TC_CHECK_ARG(o.energy_ms == 0 || backend == DeviceType::kCUDA, "bench", "--energy-ms", "the cuda backend (a GPU)",
               "the cpu backend");
  ctx.energy_ms = o.energy_ms;
  ctx.vs = o.vs_sides();  // (its own errors first: they hold on any backend)
  TC_CHECK_ARG(o.vs_config.empty() || backend == DeviceType::kCUDA, "bench", "--vs-config", "the cuda backend (a GPU)",
               "the cpu backend");
  TC_CHECK_ARG(o.vs_kernels.empty() || backend == DeviceType::kCUDA, "bench", "--vs-kernels",
               "the cuda backend (a GPU)", "the cpu backend");
  for (const std::string& dir : o.vs_kernels) check_kernel_dir(dir, "bench", "--vs-kernels");
  std::unique_ptr<harness::L2Flusher> flusher;
  if (backend == DeviceType::kCUDA) {
    if (!ceilings) {
      con.line("measuring ceilings (copy, read, GEMM, empty launch)...");
      ceilings = harness::measure_ceilings(o.gpu(), o.remeasure);
    }
    con.line(fmt::format("ceilings{}: copy {:.0f} GB/s, read {:.0f} GB/s, GEMM {:.1f} TFLOP/s, empty launch {:.2f} us",
                         ceilings->from_cache ? " (cached " + ceilings->measured_at + ")" : "", ceilings->copy_gbps,
                         ceilings->read_gbps, ceilings->gemm_tflops, ceilings->empty_launch_us));
    ctx.ceilings = &*ceilings;
    flusher = std::make_unique<harness::L2Flusher>(o.gpu());
    ctx.flusher = flusher.get();
    ctx.empty_launch_us = harness::empty_launch_us(o.gpu(), timing, ctx.flusher);
    {
      rt::Stream s(o.gpu());
      jit::KernelSpec spec{"harness/bandwidth.cuh", "tc::harness::empty_kernel", {}, "empty"};
      const auto& k = jit::get_kernel(spec, o.gpu());
      std::vector<char> p(64, 0);
      ctx.bare_launch_host_us = harness::host_us_per_call([&] { jit::launch(k, 1, 1, 32, 0, s.get(), p.data()); }, s.get());
    }
    con.line(fmt::format("empty kernel under this run's protocol: {:.2f} us on the GPU; bare launch host cost {:.2f} us",
                         ctx.empty_launch_us, ctx.bare_launch_host_us));
  }
  Records recs;
  Progress p{cases.size()};
  auto ro = o.run_options(false);
  for (size_t i = 0; i < cases.size(); ++i) {
    nlohmann::json r;
    {
      const CaseWatchdog watch(o.case_timeout, cases[i].id(), backend == DeviceType::kCUDA);
      r = harness::run_bench(cases[i], backend, ro, ctx, env);
    }
    r["kind"] = "bench";
    if (r["status"] == "error") {
      con.line(fmt::format("{} {} {} {}", p.prefix(i), refused(r) ? "REFUSED" : "ERROR",
                           r["case_id"].get<std::string>(), r["error"].get<std::string>()));
    } else {
      auto t = r["timing"];
      std::string frac = r.contains("frac_copy_bw")
                             ? fmt::format(" {:5.1f}% copy {:5.1f}% read {:5.1f}% same-size copy, {:.2f}x launch, {}",
                                           100 * r["frac_copy_bw"].get<double>(), 100 * r["frac_read_bw"].get<double>(),
                                           100 * r.value("frac_same_size_copy", 0.0), r.value("vs_empty_launch", 0.0),
                                           r.value("bound", "")) +
                                   (r.contains("host_overhead_us")
                                        ? fmt::format(", host {:.2f} us/call", r["host_overhead_us"].get<double>())
                                        : "")
                             : "";
      con.line(fmt::format("{} {} [{}] {} median {:.2f} us (p90 {:.2f}) {:.0f} GB/s{}{}{}", p.prefix(i),
                           r["case_id"].get<std::string>(), r["backend"].get<std::string>(), shape_summary(r),
                           t["median_us"].get<double>(), t["p90_us"].get<double>(), r["gbps"].get<double>(), frac,
                           r["verified"].get<bool>() ? "" : " WRONG RESULT",
                           harness::vs_sides_verified(r) ? "" : " WRONG RESULT in a vs run"));
      for (const nlohmann::json& v : r.value("vs_sides", nlohmann::json::array()))  // what the NAME@vs lines ran
        con.line(fmt::format("    {}: {}{}", v.value("suffix", std::string()).substr(1),
                             v.contains("kernel_dir")
                                 ? fmt::format("kernels of {} ({}), ", v["kernel_dir"].get<std::string>(),
                                               v.value("kernel_sources_sha256", std::string()).substr(0, 16))
                                 : std::string(),
                             v.value("config", std::string())));
      // The clock was held back while this case was timed: say so next to it.
      if (r.contains("gpu_state") && r["gpu_state"].value("slowed", false))
        con.line("    " + r["gpu_state"].value("summary", std::string()));
      if (r.value("bound", "") == "compute")
        con.line(fmt::format("    {:.1f} TFLOP/s = {:.1f}% of the GEMM ceiling ({})", r["tflops"].get<double>(),
                             100 * r.value("frac_gemm_peak", 0.0), r.value("scope", "")));
      if (r.contains("scopes"))
        for (auto& sc : r["scopes"]) {
          if (sc.contains("error")) {
            con.line(fmt::format("    {:<22} ERROR {}", sc["name"].get<std::string>(), sc["error"].get<std::string>()));
            continue;
          }
          const std::string vs = harness::scope_vs_text(r, sc);
          con.line(fmt::format("    {:<22} median {:10.2f} us{}{}  ({})", sc["name"].get<std::string>(),
                               sc["timing"]["median_us"].get<double>(),
                               sc.contains("tflops") ? fmt::format(" {:6.1f} TFLOP/s", sc["tflops"].get<double>()) : "",
                               vs.empty() ? std::string() : "  " + vs,
                               sc["note"].get<std::string>()));
        }
      if (r.contains("energy"))
        for (auto& e : r["energy"])
          con.line(fmt::format("    energy {:<15} {}", e["name"].get<std::string>(), harness::energy_summary(e)));
    }
    // Compiled with `trace`: the stamps of this case's last launch of each
    // traced kernel, read and cleared (jit::take_traces), on the console and
    // in the record.
    if (backend == DeviceType::kCUDA && ro.compile.trace)
      for (const jit::KernelTrace& t : jit::take_traces(o.gpu())) {
        con.line(harness::format_trace(t, true));
        r["traces"].push_back(harness::trace_json(t));
      }
    recs.push_back(std::move(r));
  }
  return recs;
}

void print_env(const harness::EnvInfo& env, Console& con) {
  if (!env.has_gpu) con.line("no CUDA device: " + env.no_gpu_reason);
  for (auto& [k, v] : env.j.items())
    con.line(fmt::format("{:<26} {}", k, v.is_string() ? v.get<std::string>() : v.dump()));
}

std::string find_tool(const std::string& name) {
  for (std::string dir : {jit::cuda_home() + "/bin/", std::string("/usr/local/cuda/bin/")})
    if (access((dir + name).c_str(), X_OK) == 0) return dir + name;
  if (std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0) return name;
  return "";
}

}  // namespace

int cmd_env(const Options& o) {
  check_device(o, "env");
  Console con;
  print_env(harness::capture_env(o.gpu()), con);
  return 0;
}

int cmd_list(const Options& o) {
  auto m = harness::Manifest::load(o.manifests);
  // What the filters name must exist (as test and bench refuse it), before
  // anything is printed.
  bool tagged = o.tag.empty();
  for (auto& op : m.ops())
    if (o.op.empty() || op.name == o.op)
      for (auto& w : op.workloads) tagged |= w.has_tag(o.tag);
  if (!o.op.empty() && !m.find(o.op))
    throw_arg_error(ErrorKind::kInvalidArgument, "list", "--op", "one of: " + m.op_names(), "'" + o.op + "'");
  if (!tagged)
    throw_arg_error(ErrorKind::kInvalidArgument, "list", "--tag",
                    "a tag of " + (o.op.empty() ? std::string("some workload") : "a workload of op '" + o.op + "'"),
                    "'" + o.tag + "'");
  for (auto& op : m.ops()) {
    if (!o.op.empty() && op.name != o.op) continue;
    std::cout << fmt::format("{} ({}){}: {}\n", op.name, op.family,
                             harness::has_adapter(op.name) ? "" : " [no implementation]", op.summary);
    std::cout << "  variants:";
    for (auto& v : op.variants) std::cout << " " << v.name;
    std::cout << "\n  default tags:";
    for (auto& t : op.default_tags) std::cout << " " << t;
    std::map<std::string, int> tags;
    for (auto& w : op.workloads)
      for (auto& t : w.tags) tags[t]++;
    std::cout << "\n  workloads: " << op.workloads.size() << " (";
    for (auto& [t, n] : tags) std::cout << t << ":" << n << " ";
    std::cout << ")\n";
    for (auto& w : op.workloads) {
      if (!o.tag.empty() && !w.has_tag(o.tag)) continue;
      if (o.tag.empty() && w.has_tag("full") && !w.has_tag("smoke")) continue;  // the matrix is long: --tag full
      std::string syms;
      for (auto& [k, v] : w.symbols) syms += fmt::format("{}={} ", k, v);
      std::string tg;
      for (auto& t : w.tags) tg += (tg.empty() ? "" : ",") + t;
      std::cout << fmt::format("    {:<28} {}dtype={} [{}]{}\n", w.name, syms, w.dtype, tg,
                               w.note.empty() ? "" : "  # " + w.note);
    }
    if (o.tag.empty()) std::cout << "    (workloads tagged only 'full' are listed with --tag full)\n";
  }
  return 0;
}

int cmd_compile(const Options& o) {
  check_device(o, "compile");
  auto sel = select(o, o.selection());
  Console con;
  auto recs = compile_cases(sel->cases, o, resolve_arch(o, "compile"), con);
  return exit_status({&recs});
}

namespace {
// What test and bench share: backend, cases, console, environment, and a note
// when the CPU backend stands in for a missing GPU.
struct Session {
  DeviceType backend;
  std::unique_ptr<Selected> sel;
  Console con;
  harness::EnvInfo env;
  Session(const Options& o, const char* cmd, const char* doing)
      : backend((check_device(o, cmd), resolve_backend(o))),
        sel(select(o, o.selection())),
        env(harness::capture_env(o.gpu())) {
    if (o.cpu_stand_in())
      con.line(fmt::format("note: no CUDA device ({}); {} the CPU backend", env.no_gpu_reason, doing));
    if (backend == DeviceType::kCPU && !o.config.empty())  // (a PASS here says nothing of those kernels)
      con.line(
          "note: --config sets GPU kernel configs; the CPU backend checks its keys and values as the GPU path "
          "would take them (sm_90a where there is no GPU) but runs no kernel");
    if (backend == DeviceType::kCPU && !o.scopes.empty())
      con.line("note: --scopes picks the GPU timing's scopes; the CPU backend times the main line only");
  }
};
}  // namespace

int cmd_test(const Options& o) {
  Session s(o, "test", "testing");
  precompile_for_gpu(s.sel->cases, s.backend, o, s.con);
  const Records recs = test_cases(s.sel->cases, s.backend, o, s.env, s.con);
  return exit_status({&recs});
}

int cmd_bench(const Options& o) {
  Session s(o, "bench", "timing");
  std::optional<harness::Ceilings> ceilings;
  precompile_for_gpu(s.sel->cases, s.backend, o, s.con);
  const Records recs = bench_cases(s.sel->cases, s.backend, o, s.env, o.timing(), s.con, ceilings);
  return exit_status({&recs});
}

int cmd_inspect(const Options& o) {
  check_device(o, "inspect");
  if (o.op.empty() || (o.workload.empty() && o.shapes.empty()))
    throw_arg_error(ErrorKind::kInvalidArgument, "inspect", "--op/--workload", "an op and a workload (or --shape)",
                    "op '" + o.op + "', workload '" + o.workload + "'");
  auto sel = select(o, o.selection());
  const Case& c = sel->cases.front();  // first variant unless --variant
  const std::string arch = resolve_arch(o, "inspect");
  harness::RunOptions ro = harness::with_workload_config(c, o.run_options(false));
  ro.cc_major = jit::arch_cc_major(arch);  // the kernels that arch's GPUs would run
  auto specs = harness::adapter_for(c.op->name).kernels(c, ro);
  if (specs.empty()) {
    std::cout << c.id() << ": no kernel is launched for this workload (empty problem)\n";
    return 0;
  }
  auto copts = jit::CompileOptions::parse(o.compile_options);
  for (auto& spec : specs) {
    std::cout << "// " << c.id() << ": " << spec.config << "\n";
    if (o.dump == "source") {
      std::cout << spec.generated_source() << "\n// ---- " << spec.header << " ----\n"
                << jit::find_embedded(spec.header)->text << "\n";
    } else if (o.dump == "ptx") {
      std::string ptx_arch = arch;
      ptx_arch.replace(0, 2, "compute");
      std::cout << jit::nvrtc_compile(spec, copts, ptx_arch).binary << "\n";
    } else if (o.dump == "resources") {
      auto k = jit::compile(spec, copts, arch);
      std::cout << fmt::format("kernel {}\narch {}\noptions {}\nkey {}\nlowered {}\nregisters {}\nspill stores {} B\n"
                               "spill loads {} B\nstatic smem {} B\nstack frame {} B\ncmem[0] {} B\n"
                               "code {} B ({} instructions)\ncompile {:.1f} ms ({})\n",
                               spec.name_expression(), arch, copts.str(), k->key, k->lowered_name,
                               k->resources.registers, k->resources.spill_store_bytes, k->resources.spill_load_bytes,
                               k->resources.smem_static_bytes, k->resources.stack_frame_bytes, k->resources.cmem_bytes,
                               k->resources.code_bytes, k->resources.code_bytes / 16, k->compile_ms,
                               k->disk_hit ? "disk cache hit" : "compiled now");
    } else {  // sass (the disassembler first: no compile where it cannot be shown)
      std::string tool = find_tool("cuobjdump");
      bool nvdisasm = false;
      if (tool.empty()) {
        tool = find_tool("nvdisasm");
        nvdisasm = true;
      }
      if (tool.empty())  // a tool this machine lacks: exit 4 (other errors), not a failure found
        throw Error(ErrorKind::kInternal,
                    fmt::format("inspect: argument '--dump': expected a disassembler for 'sass' (cuobjdump or "
                                "nvdisasm), got none in {}/bin, /usr/local/cuda/bin or PATH",
                                jit::cuda_home()));
      auto k = jit::compile(spec, copts, arch);
      fs::path tmp = fs::temp_directory_path() / fmt::format("tilecraft_{}_{}.cubin", getpid(), k->key.substr(0, 12));
      std::ofstream(tmp, std::ios::binary).write(k->cubin.data(), std::streamsize(k->cubin.size()));
      std::string cmd = nvdisasm ? tool + " -c '" + tmp.string() + "'" : tool + " --dump-sass '" + tmp.string() + "'";
      int rc = std::system(cmd.c_str());
      fs::remove(tmp);
      if (rc != 0) return 1;
    }
  }
  return 0;
}

// The results tree under `out`, made before any work: an unusable --out is
// the user's error, named as such, not an internal one after the compiles.
void make_results_dirs(const fs::path& out) {
  std::error_code ec;
  for (const char* sub : {"logs/raw", "logs/json", "logs/csv", "reports"}) {
    fs::create_directories(out / sub, ec);
    if (ec) break;
  }
  if (!ec) {
    const fs::path probe = out / "reports" / ".write_test";
    const bool writable = bool(std::ofstream(probe));
    std::error_code ignored;
    fs::remove(probe, ignored);
    if (!writable) ec = std::make_error_code(std::errc::permission_denied);
  }
  if (ec)
    throw_arg_error(ErrorKind::kInvalidArgument, "run", "--out", "a directory it can create and write",
                    fmt::format("'{}' ({})", out.string(), ec.message()));
}

int cmd_run(const Options& o) {
  const fs::path out = o.out;
  check_device(o, "run");
  if (!o.arch.empty()) jit::check_arch(o.arch, "run", "--arch");
  make_results_dirs(out);
  auto env = harness::capture_env(o.gpu());
  const DeviceType backend = env.has_gpu ? DeviceType::kCUDA : DeviceType::kCPU;
  harness::Selection s = o.selection();
  auto sel = select(o, s);
  std::string note;
  harness::TimingSettings timing = o.timing();
  if (!env.has_gpu) {
    note = "GPU work skipped: " + env.no_gpu_reason +
           ". Kernels were compiled for sm_90a with NVRTC; correctness and timing ran on the CPU backend "
           "(CPU timings, not GPU timings).";
    // CPU timing of the large workloads: a few repeats suffice to show the CPU backend's speed.
    timing.warmup = std::min(timing.warmup, 1);
    timing.repeat = std::min(timing.repeat, 3);
  }
  std::map<std::string, std::vector<Case>> by_op;
  for (auto& c : sel->cases) by_op[c.op->name].push_back(c);
  Records all_compile, all_test, all_bench;
  std::optional<harness::Ceilings> ceilings;
  const std::string arch =
      env.has_gpu && o.arch.empty() ? rt::device_info(o.gpu()).arch() : (o.arch.empty() ? "sm_90a" : o.arch);
  for (auto& [op, cases] : by_op) {
    Console con;
    con.file.open(out / "logs" / "raw" / (op + ".log"));
    con.line("== env");
    print_env(env, con);
    if (!note.empty()) con.line("NOTE: " + note);
    con.line(fmt::format("== compile ({} cases)", cases.size()));
    Options co = o;
    co.arch = arch;
    Records comp = compile_cases(cases, co, arch, con);
    con.line(fmt::format("== test [{}]", backend == DeviceType::kCUDA ? "cuda" : "cpu"));
    Records test = test_cases(cases, backend, o, env, con);
    con.line(fmt::format("== bench [{}]", backend == DeviceType::kCUDA ? "cuda" : "cpu"));
    Records bench = bench_cases(cases, backend, o, env, timing, con, ceilings);
    Records op_all;
    for (auto* rs : {&comp, &test, &bench}) op_all.insert(op_all.end(), rs->begin(), rs->end());
    harness::write_jsonl((out / "logs" / "json" / (op + ".jsonl")).string(), op_all);
    harness::write_csv((out / "logs" / "csv" / (op + ".csv")).string(), op_all);
    all_compile.insert(all_compile.end(), comp.begin(), comp.end());
    all_test.insert(all_test.end(), test.begin(), test.end());
    all_bench.insert(all_bench.end(), bench.begin(), bench.end());
  }
  std::ofstream(out / "reports" / "correctness_report.md") << harness::correctness_report(env, all_test, note);
  std::ofstream(out / "reports" / "performance_report.md")
      << harness::performance_report(env, ceilings ? &*ceilings : nullptr, all_bench, note);
  std::ofstream(out / "reports" / "algorithm_design_report.md")
      << harness::design_report(sel->manifest, all_bench, all_compile);
  std::cout << fmt::format("results written to {} (logs/raw, logs/json, logs/csv, reports/)\n", out.string());
  if (!note.empty()) std::cout << "NOTE: " << note << "\n";
  // A kernel that did not compile or a timed output that was wrong fails the
  // main job as a failed test does.
  return exit_status({&all_compile, &all_test, &all_bench});
}

}  // namespace tilecraft::cli
