#include "tilecraft/harness/runner.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <cmath>
#include <cstring>

#include "tilecraft/error.h"
#include "tilecraft/harness/energy.h"
#include "tilecraft/harness/gpu_state.h"
#include "tilecraft/harness/random.h"
#include "tilecraft/harness/report.h"
#include "tilecraft/jit/embedded_sources.h"
#include "tilecraft/jit/hash.h"
#include "tilecraft/jit/jit.h"
#include "tilecraft/parallel.h"
#include "tilecraft/runtime/device.h"
#include "tilecraft/runtime/driver.h"

namespace tilecraft::harness {
namespace {

constexpr uint8_t kPoison = 0xff;  // NaN in every float dtype: an unwritten element fails

uint64_t case_seed(const Case& c, uint64_t base) { return mix64(base ^ hash_string(c.id())); }

// Device copies of a case's inputs and a poisoned output.
struct DeviceCase {
  std::map<std::string, DeviceTensor> owned, owned_out;
  Tensors in, out;
  DeviceCase(const CaseData& d, int device) {
    for (auto& [name, t] : d.inputs) {
      owned.emplace(name, DeviceTensor::from_host(t, device));
      in[name] = owned.at(name).view();
    }
    for (auto& [name, g] : d.generated) {
      owned.emplace(name, DeviceTensor(g.dtype, g.shape, device));
      in[name] = owned.at(name).view();
      fill_uniform_device(in[name], d.seed, g.stream, g.lo, g.hi, nullptr);
    }
    if (!d.generated.empty()) TC_DRV(cuCtxSynchronize);
    for (auto& o : d.outputs) {
      owned_out.emplace(o.name, DeviceTensor(o.dtype, o.shape, device));
      out[o.name] = owned_out.at(o.name).view();
    }
    poison();
  }
  void poison() {
    for (auto& [n, t] : owned_out) t.fill_bytes(kPoison);
  }
  std::map<std::string, HostTensor> download() const {
    std::map<std::string, HostTensor> h;
    for (auto& [n, t] : owned_out) h.emplace(n, t.to_host());
    return h;
  }
};

Tensors views_of(const std::map<std::string, HostTensor>& m) {
  Tensors v;
  for (auto& [n, t] : m) v[n] = t.view();
  return v;
}

nlohmann::json base_record(const Case& c, DeviceType backend, const CaseData& d, const EnvInfo& env) {
  nlohmann::json r;
  r["case_id"] = c.id();
  r["op"] = c.op->name;
  r["variant"] = c.variant->name;
  r["workload"] = c.workload->name;
  r["backend"] = backend == DeviceType::kCUDA ? "cuda" : "cpu";
  r["seed"] = c.seed;
  nlohmann::json shapes, dtypes;
  for (auto& [n, t] : d.inputs) {
    shapes[n] = t.shape().vec();
    dtypes[n] = dtype_name(t.dtype());
  }
  for (auto& [n, g] : d.generated) {
    shapes[n] = g.shape.vec();
    dtypes[n] = dtype_name(g.dtype);
  }
  for (auto& o : d.outputs) {
    shapes[o.name] = o.shape.vec();
    dtypes[o.name] = dtype_name(o.dtype);
  }
  r["shapes"] = shapes;
  r["dtypes"] = dtypes;
  r["symbols"] = d.symbols;
  r["timestamp"] = now_iso8601();
  r["git_commit"] = env.j.is_object() ? env.j.value("git_commit", "unknown") : git_commit();
  // The kernel texts compiled (names the tree where the git commit cannot).
  r["kernel_sources_sha256"] =
      env.j.is_object() ? env.j.value("kernel_sources_sha256", "unknown") : jit::kernel_sources_sha256().substr(0, 16);
  r["device"] = backend == DeviceType::kCUDA ? env.device_label() : "cpu";
  return r;
}

std::string config_of(const Case& c, const RunOptions& o) {
  std::string s;
  for (auto& k : adapter_for(c.op->name).kernels(c, o)) s += (s.empty() ? "" : "; ") + k.config;
  return s.empty() ? "no kernel (empty problem)" : s + " [" + o.compile.str() + "]";
}

// The record's "config" on the CPU backend. It runs no kernel, but a
// --config is resolved as the GPU path would take it (this machine's GPU,
// or sm_90a where there is none: what `tilecraft compile` lists), so a value
// no kernel takes (block_m=3) is refused here as on a GPU, not passed.
std::string cpu_config_of(const Case& c, const RunOptions& o) {
  if (!o.config.empty()) (void)config_of(c, o);
  return "cpu";
}

// Compares `got` with the golden, bitwise or allclose; fills the record.
// Chunks run in parallel; each keeps its own first failure and maxima.
}  // namespace

bool compare_tensor(const Tolerance& op_tol, const TensorView& want, const TensorView& got, nlohmann::json& r) {
  const Tolerance tol = op_tol.for_dtype(want.dtype);
  const int64_t n = want.numel();
  const size_t es = dtype_size(want.dtype);
  const bool bitwise = tol.mode == "bitwise";
  struct Part {
    int64_t failed = 0, first = -1, nonfinite = 0;
    double max_abs = 0, max_rel = 0;
  };
  const int64_t chunk = 1 << 18;
  std::vector<Part> parts(size_t((n + chunk - 1) / chunk));
  parallel_for(int64_t(parts.size()), chunk, [&](int64_t pb, int64_t pe) {
    for (int64_t pi = pb; pi < pe; ++pi) {
      Part& part = parts[size_t(pi)];
      for (int64_t i = pi * chunk; i < std::min(n, (pi + 1) * chunk); ++i) {
        double w = load_as_double(want.data, want.dtype, size_t(i));
        double g = load_as_double(got.data, got.dtype, size_t(i));
        if (!std::isfinite(g)) ++part.nonfinite;
        bool ok = bitwise ? std::memcmp(static_cast<const char*>(want.data) + size_t(i) * es,
                                        static_cast<const char*>(got.data) + size_t(i) * es, es) == 0
                          : (std::fabs(g - w) <= tol.atol + tol.rtol * std::fabs(w) ||
                             (std::isnan(g) && std::isnan(w)));
        double abs_err = std::fabs(g - w);
        if (std::isnan(abs_err)) abs_err = (std::isnan(g) && std::isnan(w)) ? 0 : INFINITY;
        part.max_abs = std::max(part.max_abs, abs_err);
        if (w != 0) part.max_rel = std::max(part.max_rel, abs_err / std::fabs(w));
        if (!ok) {
          if (part.first < 0) part.first = i;
          ++part.failed;
        }
      }
    }
  });
  Part total;
  for (auto& p : parts) {
    total.failed += p.failed;
    total.nonfinite += p.nonfinite;
    total.max_abs = std::max(total.max_abs, p.max_abs);
    total.max_rel = std::max(total.max_rel, p.max_rel);
    if (total.first < 0) total.first = p.first;
  }
  if (total.first >= 0)
    r["first_failure"] = {{"index", total.first},
                          {"got", load_as_double(got.data, got.dtype, size_t(total.first))},
                          {"want", load_as_double(want.data, want.dtype, size_t(total.first))}};
  r["compare_mode"] = bitwise ? "bitwise" : "allclose";
  r["atol"] = tol.atol;
  r["rtol"] = tol.rtol;
  r["max_abs_err"] = total.max_abs;
  r["max_rel_err"] = total.max_rel;
  r["num_elements"] = n;
  r["num_failed"] = total.failed;
  r["pass_rate"] = n ? double(n - total.failed) / double(n) : 1.0;
  r["nonfinite_outputs"] = total.nonfinite;
  return total.failed == 0;
}

bool OpAdapter::compare(const CaseData& d, const OpSpec& op, const Tensors& want, const Tensors& got,
                        nlohmann::json& r) const {
  bool ok = true;
  if (d.outputs.size() == 1) return compare_tensor(op.tolerance, want.at(d.outputs[0].name), got.at(d.outputs[0].name), r);
  // Several outputs: one sub-record each, and the headline fields summed / maxed.
  int64_t n = 0, failed = 0, nonfinite = 0;
  double max_abs = 0, max_rel = 0;
  for (auto& o : d.outputs) {
    nlohmann::json sub;
    ok &= compare_tensor(op.tolerance, want.at(o.name), got.at(o.name), sub);
    n += sub["num_elements"].get<int64_t>();
    failed += sub["num_failed"].get<int64_t>();
    nonfinite += sub["nonfinite_outputs"].get<int64_t>();
    max_abs = std::max(max_abs, sub["max_abs_err"].get<double>());
    max_rel = std::max(max_rel, sub["max_rel_err"].get<double>());
    if (sub.contains("first_failure") && !r.contains("first_failure")) {
      r["first_failure"] = sub["first_failure"];
      r["first_failure"]["output"] = o.name;
    }
    r["outputs"][o.name] = sub;
  }
  r["compare_mode"] = op.tolerance.mode;
  r["num_elements"] = n;
  r["num_failed"] = failed;
  r["nonfinite_outputs"] = nonfinite;
  r["max_abs_err"] = max_abs;
  r["max_rel_err"] = max_rel;
  r["pass_rate"] = n ? double(n - failed) / double(n) : 1.0;
  return ok;
}

namespace {
// The name --scopes takes for the main line (always timed): picked last,
// the trace stamps are its own.
constexpr const char* kMainScope = "main";

// The scopes `names` picks, in the op's order (empty: all); a name the op
// does not have (other than "main") is an error that lists the ones it has.
std::vector<TimedScope> selected_scopes(std::vector<TimedScope> all, const std::vector<std::string>& names) {
  if (names.empty()) return all;
  std::string have = kMainScope;
  for (const TimedScope& sc : all) have += ", " + sc.name;
  for (const std::string& n : names)
    TC_CHECK_ARG(n == kMainScope ||
                     std::any_of(all.begin(), all.end(), [&](const TimedScope& sc) { return sc.name == n; }),
                 "bench", "--scopes", "scopes of this case (" + have + ")", "'" + n + "'");
  std::vector<TimedScope> kept;
  for (TimedScope& sc : all)
    if (std::find(names.begin(), names.end(), sc.name) != names.end()) kept.push_back(std::move(sc));
  return kept;
}

// Host tensors for every output, poisoned, and views of them.
// Each output's bits, hashed (SHA-256, first 16 hex digits): runs, builds or
// machines that computed the same bits record the same value, so a record
// shows reproducibility, not only closeness to the golden.
nlohmann::json output_hashes(const std::map<std::string, HostTensor>& got) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, t] : got)
    j[name] = jit::sha256_hex(std::string_view(static_cast<const char*>(t.data()), t.nbytes())).substr(0, 16);
  return j;
}

struct HostOutputs {
  std::map<std::string, HostTensor> owned;
  Tensors views;
  explicit HostOutputs(const CaseData& d) {
    for (auto& o : d.outputs) {
      HostTensor t(o.dtype, o.shape);
      t.fill_bytes(kPoison);
      owned.emplace(o.name, t);
      views[o.name] = t.view();
    }
  }
};

// Host views of every input, generated ones materialised (CPU backend).
struct HostInputs {
  std::map<std::string, HostTensor> made;
  Tensors views;
  explicit HostInputs(const CaseData& d) {
    for (auto& [n, t] : d.inputs) views[n] = t.view();
    for (auto& [n, g] : d.generated) {
      made.emplace(n, materialize(g, d.seed));
      views[n] = made.at(n).view();
    }
  }
};

}  // namespace

void generated_values(const GeneratedInput& g, uint64_t seed, int64_t begin, int64_t n, float* out) {
  uniform_values(seed, g.stream, uint64_t(begin), n, g.lo, g.hi - g.lo, out);
  // Rounded to the input's dtype and back, as the tensor holds them.
  switch (g.dtype) {
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = conv::bf16_to_f32(conv::f32_to_bf16(out[i]));
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) out[i] = conv::f16_to_f32(conv::f32_to_f16(out[i]));
      break;
    case DType::kF8E4M3:
      for (int64_t i = 0; i < n; ++i) out[i] = conv::e4m3_to_f32(conv::f32_to_e4m3(out[i]));
      break;
    default: break;
  }
}

HostTensor materialize(const GeneratedInput& g, uint64_t seed) {
  HostTensor t(g.dtype, g.shape);
  fill_uniform(t.view(), seed, g.stream, g.lo, g.hi);
  return t;
}

double host_us_per_call(const std::function<void()>& call, CUstream stream, double gpu_ms_per_call) {
  // Batches of 10..100 calls, fewer when each call keeps the GPU busy long:
  // 500 calls of a 20 ms layer would be 10 s of full load, which heats the
  // GPU and slows whatever is timed after it.
  const int batches = 5;
  const int n = gpu_ms_per_call > 2.0 ? std::max(10, int(200.0 / gpu_ms_per_call)) : 100;
  std::vector<double> per_call;
  for (int b = 0; b < batches; ++b) {
    TC_DRV(cuStreamSynchronize, stream);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) call();
    per_call.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n);
  }
  TC_DRV(cuStreamSynchronize, stream);
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

std::vector<Case> select_cases(const Manifest& m, const Selection& s, std::deque<WorkloadSpec>& storage) {
  std::vector<Case> out;
  if (!s.shapes.empty() && s.op.empty() && m.ops().size() > 1)
    throw_arg_error(ErrorKind::kInvalidArgument, "select", "--shape", "--op to say which op the shape is for",
                    "no --op");
  bool op_found = s.op.empty(), workload_found = false, tag_found = false;
  // --shape adds ad-hoc workloads beside what --workload / --tag select;
  // shapes alone run just themselves (no default-tagged workloads).
  const bool from_manifest = s.shapes.empty() || !s.workload.empty() || !s.tag.empty();
  for (const OpSpec& op : m.ops()) {
    if (!s.op.empty() && op.name != s.op) continue;
    op_found = true;
    if (!has_adapter(op.name)) {
      if (!s.op.empty()) adapter_for(op.name);  // throws: the op is in the manifest without an implementation
      continue;
    }
    std::vector<const WorkloadSpec*> ws;
    if (from_manifest)
      for (auto& w : op.workloads) {
        if (!s.workload.empty() && w.name != s.workload) continue;
        workload_found = true;
        bool tagged = false;
        if (!s.tag.empty()) tag_found |= tagged = w.has_tag(s.tag);
        else if (!s.workload.empty()) tagged = true;
        else
          for (auto& t : op.default_tags) tagged |= w.has_tag(t);
        if (tagged) ws.push_back(&w);
      }
    for (auto& text : s.shapes) {
      storage.push_back(parse_shape_workload(op, text));
      ws.push_back(&storage.back());
    }
    for (const WorkloadSpec* w : ws)
      for (auto& v : op.variants) {
        if (!s.variant.empty() && v.name != s.variant) continue;
        Case c{&op, &v, w, 0};
        c.seed = case_seed(c, s.seed);
        out.push_back(c);
      }
  }
  if (!op_found) {
    throw_arg_error(ErrorKind::kInvalidArgument, "select", "--op", "one of: " + m.op_names(), "'" + s.op + "'");
  }
  // A misspelt --workload or --tag beside --shape would otherwise run the shapes alone.
  if (!s.workload.empty() && !workload_found)
    throw_arg_error(
        ErrorKind::kInvalidArgument, "select", "--workload",
        "a workload of " + (s.op.empty() ? std::string("an op") : "op '" + s.op + "'") + " (tilecraft list shows them)",
        "'" + s.workload + "'");
  if (!s.tag.empty() && s.workload.empty() && !tag_found)
    throw_arg_error(ErrorKind::kInvalidArgument, "select", "--tag",
                    "a tag of " + (s.op.empty() ? std::string("some workload") : "a workload of op '" + s.op + "'") +
                        " (tilecraft list shows them)",
                    "'" + s.tag + "'");
  if (out.empty())
    throw Error(ErrorKind::kInvalidArgument,
                fmt::format("select: no case matches --op '{}' --variant '{}' --workload '{}' --tag '{}'", s.op,
                            s.variant, s.workload, s.tag));
  return out;
}

namespace {
void record_error(nlohmann::json& r, const Error& e) {
  r["status"] = "error";
  r["error"] = e.what();
  // An op's validator (or a config key) refused what the case asked for: the
  // user's shape or option, not a wrong result. The CLI exits 2 for these
  // (as for any argument it refuses up front) and 1 for failures.
  r["refused"] = e.kind() == ErrorKind::kInvalidArgument || e.kind() == ErrorKind::kType;
}

// Sizes and generates the case's inputs into `d`; where that is refused (a
// tensor that cannot exist, a workload parameter the op does not take) the
// case's record says so instead, so a run of many cases goes on past it.
std::optional<nlohmann::json> generate_or_refuse(const OpAdapter& a, const Case& c, DeviceType backend,
                                                 const RunOptions& o, const EnvInfo& env, CaseData& d) {
  try {
    check_case_fits(c, backend, o.device);
    if (backend == DeviceType::kCPU && o.cpu_stand_in) check_cpu_stand_in_work(c);
    d = a.generate(c);
    return std::nullopt;
  } catch (const Error& e) {
    nlohmann::json r = base_record(c, backend, CaseData{}, env);
    record_error(r, e);
    return r;
  }
}
}  // namespace

nlohmann::json run_correctness(const Case& c, DeviceType backend, const RunOptions& given, const EnvInfo& env) {
  const OpAdapter& a = adapter_for(c.op->name);
  auto t0 = std::chrono::steady_clock::now();
  CaseData d;
  if (auto refused = generate_or_refuse(a, c, backend, given, env, d)) return *refused;
  nlohmann::json r = base_record(c, backend, d, env);
  r["golden"] = "cpu reference (" + c.op->tolerance.mode + ")";
  r["checked_mode"] = given.checked;
  try {
    const RunOptions o = with_workload_config(c, given);
    r["config"] = backend == DeviceType::kCUDA ? config_of(c, o) : cpu_config_of(c, o);
    HostOutputs want(d);
    a.golden(d, want.views);
    std::map<std::string, HostTensor> got;
    if (backend == DeviceType::kCUDA) {
      DeviceCase dc(d, o.device);
      rt::Stream stream(o.device);
      a.run(d, dc.in, dc.out, backend, stream.get(), o);
      stream.sync();
      got = dc.download();
    } else {
      HostOutputs h(d);
      HostInputs hin(d);
      a.run(d, hin.views, h.views, backend, nullptr, o);
      got = h.owned;
    }
    r["output_sha256"] = output_hashes(got);
    bool ok = a.compare(d, *c.op, want.views, views_of(got), r);
    // Independent check of the output (and so of the golden) in float64.
    F64Check f = a.check_f64(d, views_of(got));
    r["f64_max_abs_err"] = f.max_abs_err;
    r["f64_max_err_over_bound"] = f.max_excess;
    r["f64_num_failed"] = f.num_failed;
    ok = ok && f.num_failed == 0;
    r["status"] = ok ? "pass" : "fail";
    if (!ok) {
      r["error"] = f.num_failed ? fmt::format("{} element(s) outside the float64 error bound (first at {})",
                                              f.num_failed, f.first_failed)
                                : fmt::format("{} element(s) differ from the golden", r["num_failed"].get<int64_t>());
    }
  } catch (const Error& e) {
    record_error(r, e);
  }
  r["elapsed_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

namespace {
// An A/B side as its flags gave it: "KEY=N,KEY=N", "kernels of DIR", or both.
std::string vs_side_text(const VsSide& side) {
  std::string s;
  for (const auto& [key, value] : side.config) s += (s.empty() ? "" : ",") + key + "=" + std::to_string(value);
  if (!side.kernel_dir.empty()) s += (s.empty() ? "" : ", ") + std::string("kernels of ") + side.kernel_dir;
  return s;
}
}  // namespace

nlohmann::json run_bench(const Case& c, DeviceType backend, const RunOptions& given, const BenchContext& ctx,
                         const EnvInfo& env) {
  const OpAdapter& a = adapter_for(c.op->name);
  CaseData d;
  if (auto refused = generate_or_refuse(a, c, backend, given, env, d)) return *refused;
  nlohmann::json r = base_record(c, backend, d, env);
  r["scope"] = a.main_scope();
  r["flush"] = ctx.timing.hot ? "none (hot)" : ctx.timing.flush;
  r["warmup"] = ctx.timing.warmup;
  r["warmup_ms"] = ctx.timing.warmup_ms;
  r["repeat"] = ctx.timing.repeat;
  r["trials"] = ctx.timing.trials;
  r["dependent_launch"] = jit::dependent_launch_enabled();  // PDL moves decode times by up to ~10%
  const double bytes = c.variant->bytes.eval(d.symbols);
  const double flops = c.variant->flops.eval(d.symbols);
  r["bytes"] = bytes;
  r["flops"] = flops;
  if (c.variant->bytes_valid) r["bytes_valid"] = c.variant->bytes_valid->eval(d.symbols);
  try {
    const RunOptions o = with_workload_config(c, given);
    TimingStats t;
    HostOutputs want(d);
    a.golden(d, want.views);
    std::map<std::string, HostTensor> got;
    if (backend == DeviceType::kCUDA) {
      r["config"] = config_of(c, o);
      DeviceCase dc(d, o.device);
      rt::Stream stream(o.device);
      auto fn = [&](CUstream s) { a.run(d, dc.in, dc.out, backend, s, o); };
      // The main line and its scopes (stages, baselines) are timed in rounds,
      // one call of each per repeat, so they share one clock and thermal
      // state (the host-cost batches below come last). The scopes are built
      // from the state of a finished main call (the layer's baselines read
      // the routing it chose), so one call runs first.
      fn(stream.get());
      stream.sync();
      std::vector<TimedScope> scopes = selected_scopes(a.bench_scopes(d, dc.in, dc.out, o), ctx.scopes);
      // --vs-config / --vs-kernels: the same case under other overrides or
      // another tree's kernels, one run per side, its lines timed in the same
      // rounds as these (so every side shares each round's clock and power
      // state), named NAME + the side's suffix and judged against NAME.
      std::vector<std::function<void(CUstream)>> fn_vs;
      std::deque<RunOptions> vs_options;  // stable: the sides' scopes keep references to theirs
      for (const VsSide& side : ctx.vs) {
        RunOptions& ob = vs_options.emplace_back(o);
        for (const auto& [key, value] : side.config) ob.config[key] = value;
        if (!side.kernel_dir.empty()) ob.compile.kernel_dir = side.kernel_dir;
        const std::function<void(CUstream)> fn_b = [&a, &d, &dc, backend, side_o = &ob](CUstream s) {
          a.run(d, dc.in, dc.out, backend, s, *side_o);
        };
        nlohmann::json v{{"suffix", side.suffix}};
        std::vector<TimedScope> b;
        try {  // (its kernels, a first call, its scopes)
          v["config"] = config_of(c, ob);
          fn_b(stream.get());
          stream.sync();
          b = selected_scopes(a.bench_scopes(d, dc.in, dc.out, ob), ctx.scopes);
        } catch (const Error& e) {  // say which side: several may run
          throw Error(e.kind(), fmt::format("A/B side {} ({}): {}", side.suffix, vs_side_text(side), e.what()));
        }
        if (!side.kernel_dir.empty()) {
          v["kernel_dir"] = side.kernel_dir;
          v["kernel_sources_sha256"] = jit::kernel_sources_sha256(side.kernel_dir);
        }
        r["vs_sides"].push_back(std::move(v));
        scopes.push_back(
            {std::string(kMainScope) + side.suffix, "the main line (" + a.main_scope() + ")", fn_b, flops, kMainScope});
        for (TimedScope& sc : b) {
          sc.vs = sc.name;
          sc.name += side.suffix;
          scopes.push_back(std::move(sc));
        }
        fn_vs.push_back(fn_b);
      }
      std::vector<std::function<void(CUstream)>> fns{fn};
      for (const TimedScope& sc : scopes) fns.push_back(sc.fn);
      // The clock and power policy's record over the timed rounds (NVML
      // counters before and after; nothing sampled while they run).
      std::string no_state;
      const std::optional<GpuCounters> before = read_gpu_counters(o.device, &no_state);
      const InterleavedTimings it = time_cuda_interleaved(fns, stream.get(), ctx.timing, ctx.flusher);
      const std::optional<GpuCounters> after = before ? read_gpu_counters(o.device, &no_state) : std::nullopt;
      r["gpu_state"] = before && after ? gpu_state_delta(*before, *after).to_json()
                                       : nlohmann::json{{"unavailable", no_state}};
      t = it.stats[0];
      // Energy per call, each scope alone (the main line as "main"), sized
      // by its timed median; a scope whose timing failed is left out.
      if (ctx.energy_ms > 0)
        for (size_t k = 0; k < fns.size(); ++k) {
          if (k > 0 && !it.errors[k].empty()) continue;
          nlohmann::json e;
          try {
            e = energy_per_call(fns[k], o.device, stream.get(), ctx.timing, ctx.flusher, it.stats[k].median,
                                ctx.energy_ms);
          } catch (const Error& ex) {  // a scope's failure is its own, as in the timing
            if (k == 0) throw;
            e = {{"unavailable", ex.what()}};
          }
          e["name"] = k == 0 ? std::string("main") : scopes[k - 1].name;
          r["energy"].push_back(std::move(e));
        }
      for (size_t k = 0; k < scopes.size(); ++k) {
        const TimedScope& sc = scopes[k];
        nlohmann::json j{{"name", sc.name}, {"note", sc.note}};
        if (!sc.vs.empty()) j["vs"] = sc.vs;
        if (!it.errors[k + 1].empty()) {
          j["error"] = it.errors[k + 1];
        } else {
          const TimingStats& st = it.stats[k + 1];
          j["timing"] = st.to_json_us();
          if (sc.flops > 0 && st.median > 0) j["tflops"] = sc.flops / (st.median * 1e-3) / 1e12;
        }
        r["scopes"].push_back(j);
      }
      if (ctx.host_overhead) {
        // Host cost of a cached call: enqueue batches without syncing; the
        // median batch's time per call.
        r["host_overhead_us"] = host_us_per_call([&] { fn(stream.get()); }, stream.get(), t.median);
        if (ctx.bare_launch_host_us > 0) r["bare_launch_host_us"] = ctx.bare_launch_host_us;
      }
      // The timed output must still be right (catches races and stale buffers).
      const auto output_of = [&](const std::function<void(CUstream)>& f) {
        dc.poison();
        f(stream.get());
        stream.sync();
        return dc.download();
      };
      got = output_of(fn);
      for (size_t k = 0; k < fn_vs.size(); ++k) {  // the other runs' outputs, checked as this one's is below
        const std::map<std::string, HostTensor> got_b = output_of(fn_vs[k]);
        nlohmann::json cmp_b;
        r["vs_sides"][k]["verified"] = a.compare(d, *c.op, want.views, views_of(got_b), cmp_b);
        r["vs_sides"][k]["max_abs_err"] = cmp_b.value("max_abs_err", 0.0);
      }
      // Trace stamps (bench prints each traced kernel's last launch) are the
      // check's, a main-line call after the timing, unless scopes were
      // picked: then the last name given runs once more, as it was timed
      // (L2 flushed first), so the stamps are that scope's ("main": the
      // main line's).
      if (o.compile.trace && !ctx.scopes.empty()) {
        const std::string& last = ctx.scopes.back();
        const auto sc = std::find_if(scopes.begin(), scopes.end(), [&](const TimedScope& s) { return s.name == last; });
        if (!ctx.timing.hot && ctx.flusher) ctx.flusher->flush(stream.get(), ctx.timing.flush);
        if (sc != scopes.end()) sc->fn(stream.get());
        else fn(stream.get());  // "main"
        stream.sync();
      }
    } else {
      r["config"] = cpu_config_of(c, o);
      HostOutputs h(d);
      HostInputs hin(d);
      t = time_cpu([&] { a.run(d, hin.views, h.views, backend, nullptr, o); }, ctx.timing);
      got = h.owned;
    }
    nlohmann::json cmp;
    r["output_sha256"] = output_hashes(got);
    r["verified"] = a.compare(d, *c.op, want.views, views_of(got), cmp);
    r["timing"] = t.to_json_us();
    const double sec = t.median * 1e-3;
    r["gbps"] = sec > 0 ? bytes / sec / 1e9 : 0;
    r["tflops"] = sec > 0 ? flops / sec / 1e12 : 0;
    if (r.contains("bytes_valid")) r["gbps_valid"] = sec > 0 ? r["bytes_valid"].get<double>() / sec / 1e9 : 0;
    if (ctx.ceilings && backend == DeviceType::kCUDA) {
      const Ceilings& ce = *ctx.ceilings;
      r["frac_copy_bw"] = r["gbps"].get<double>() / ce.copy_gbps;
      r["frac_read_bw"] = r["gbps"].get<double>() / ce.read_gbps;
      if (ce.gemm_tflops > 0) r["frac_gemm_peak"] = r["tflops"].get<double>() / ce.gemm_tflops;
      const double launch_us = ctx.empty_launch_us > 0 ? ctx.empty_launch_us : ce.empty_launch_us;
      r["empty_launch_us"] = launch_us;
      r["vs_empty_launch"] = t.median * 1e3 / launch_us;
      if (ctx.same_size_copy && bytes > 0) {
        double copy_us = same_size_copy_us(bytes, given.device, ctx.timing, ctx.flusher);
        r["same_size_copy_us"] = copy_us;
        r["frac_same_size_copy"] = copy_us / (t.median * 1e3);
      }
      const double ridge = ce.gemm_tflops > 0 ? ce.gemm_tflops * 1e12 / (ce.copy_gbps * 1e9) : 200.0;
      const double intensity = bytes > 0 ? flops / bytes : 0;
      if (t.median * 1e3 < 3 * launch_us) {
        r["bound"] = "latency";
        r["bound_rule"] = fmt::format("median {:.2f} us < 3 x empty-kernel launch ({:.2f} us)", t.median * 1e3,
                                      launch_us);
      } else if (intensity < ridge) {
        r["bound"] = "memory";
        r["bound_rule"] = fmt::format("intensity {:.3f} flop/B < ridge {:.1f} flop/B (GEMM peak / copy bw)", intensity,
                                      ridge);
      } else {
        r["bound"] = "compute";
        r["bound_rule"] = fmt::format("intensity {:.3f} flop/B >= ridge {:.1f} flop/B", intensity, ridge);
      }
    }
    r["status"] = r["verified"].get<bool>() && vs_sides_verified(r) ? "ok" : "wrong result";
  } catch (const Error& e) {
    record_error(r, e);
  }
  return r;
}

}  // namespace tilecraft::harness
