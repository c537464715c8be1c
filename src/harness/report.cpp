#include "tilecraft/harness/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "tilecraft/error.h"

namespace tilecraft::harness {
namespace {

std::ofstream open_out(const std::string& path) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path);
  if (!out) throw Error(ErrorKind::kInvalidArgument, "report: cannot write '" + path + "'");
  return out;
}

void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) flatten(v, prefix.empty() ? k : prefix + "." + k, out);
  } else if (j.is_string()) {
    out[prefix] = j.get<std::string>();
  } else {
    out[prefix] = j.dump();
  }
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string num(const nlohmann::json& r, const char* key, const char* f = "{:.2f}") {
  if (!r.contains(key) || r[key].is_null()) return "-";
  if (r[key].is_number()) return fmt::format(fmt::runtime(f), r[key].get<double>());
  return r[key].dump();
}

std::string pct(const nlohmann::json& r, const char* key) {
  if (!r.contains(key)) return "-";
  return fmt::format("{:.1f}%", 100 * r[key].get<double>());
}

}  // namespace

void write_jsonl(const std::string& path, const Records& records) {
  auto out = open_out(path);
  for (auto& r : records) out << r.dump() << "\n";
}

void write_csv(const std::string& path, const Records& records) {
  std::vector<std::map<std::string, std::string>> rows;
  std::vector<std::string> cols;
  std::set<std::string> seen;
  for (auto& r : records) {
    std::map<std::string, std::string> row;
    flatten(r, "", row);
    for (auto& [k, v] : row)
      if (seen.insert(k).second) cols.push_back(k);
    rows.push_back(std::move(row));
  }
  auto out = open_out(path);
  for (size_t i = 0; i < cols.size(); ++i) out << (i ? "," : "") << csv_cell(cols[i]);
  out << "\n";
  for (auto& row : rows) {
    for (size_t i = 0; i < cols.size(); ++i) {
      auto it = row.find(cols[i]);
      out << (i ? "," : "") << (it == row.end() ? "" : csv_cell(it->second));
    }
    out << "\n";
  }
}

std::string env_markdown(const EnvInfo& env) {
  std::string s = "| field | value |\n|---|---|\n";
  for (auto& [k, v] : env.j.items()) s += fmt::format("| {} | {} |\n", k, v.is_string() ? v.get<std::string>() : v.dump());
  return s;
}

std::string refused_note(int refused) {
  // Refusals come from an op (a shape, argument or config it does not take)
  // or from the case's size (more than the GPU's or host's memory, or more
  // than the CPU stand-in runs): each case's own line says which.
  if (refused <= 0) return "";
  return fmt::format(", {} refused (an op does not take the shape, argument or config, or the case is too large for "
                     "where it would run: each line says which)",
                     refused);
}

std::string correctness_report(const EnvInfo& env, const Records& recs, const std::string& note) {
  int pass = 0, fail = 0, err = 0, refused = 0;
  for (auto& r : recs) {
    std::string st = r.value("status", "");
    (st == "pass" ? pass : st == "fail" ? fail : r.value("refused", false) ? refused : err)++;
  }
  std::string s = "# Correctness report\n\n";
  if (!note.empty()) s += "> " + note + "\n\n";
  s += fmt::format("**{} passed, {} failed, {} errors{}** out of {} cases. Golden: the CPU reference of each op "
                   "(bitwise where the op promises it), plus an independent float64 evaluation with a derived "
                   "error bound. Outputs are poisoned (0xff bytes, NaN) before every run.\n\n",
                   pass, fail, err, refused_note(refused),
                   recs.size());
  s += "## Environment\n\n" + env_markdown(env) + "\n## Cases\n\n";
  s += "| case | backend | status | mode | elements | failed | max abs err | f64 err/bound | seed | config |\n";
  s += "|---|---|---|---|---|---|---|---|---|---|\n";
  for (auto& r : recs) {
    s += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r.value("case_id", "?"),
                     r.value("backend", "?"), r.value("status", "?"), r.value("compare_mode", "-"),
                     num(r, "num_elements", "{:.0f}"), num(r, "num_failed", "{:.0f}"), num(r, "max_abs_err", "{:.3g}"),
                     num(r, "f64_max_err_over_bound", "{:.3f}"), r.value("seed", uint64_t(0)), r.value("config", "-"));
    if (r.contains("error")) s += fmt::format("| ↳ error | | | | | | | | | {} |\n", r["error"].get<std::string>());
  }
  return s;
}

double scope_vs_ratio(const nlohmann::json& record, const nlohmann::json& scope) {
  if (!scope.contains("vs") || !record.contains("scopes")) return 0;
  const auto median = [](const nlohmann::json& j) {
    return j.contains("timing") ? j["timing"].value("median_us", 0.0) : 0.0;
  };
  const double mine = median(scope);
  const std::string& other = scope["vs"].get_ref<const std::string&>();
  for (auto& o : record["scopes"])
    if (o.value("name", "") == other) {
      const double theirs = median(o);
      return mine > 0 && theirs > 0 ? mine / theirs : 0;
    }
  if (other == "main") {  // the record's own line (bench --scopes and --energy-ms call it so too)
    const double theirs = median(record);
    return mine > 0 && theirs > 0 ? mine / theirs : 0;
  }
  return 0;
}

std::string scope_vs_text(const nlohmann::json& record, const nlohmann::json& scope) {
  const double ratio = scope_vs_ratio(record, scope);
  if (ratio <= 0) return "";
  const std::string& other = scope["vs"].get_ref<const std::string&>();
  return is_vs_config_scope(scope) ? fmt::format("{:.3f}x {}", ratio, other) : fmt::format("{:.2f}x {}", ratio, other);
}

std::string vs_suffix(size_t i, size_t n) { return n == 1 ? kVsConfigSuffix : kVsConfigSuffix + std::to_string(i + 1); }

bool vs_sides_verified(const nlohmann::json& record) {
  if (!record.contains("vs_sides")) return true;
  const nlohmann::json& sides = record["vs_sides"];
  return std::all_of(sides.begin(), sides.end(), [](const nlohmann::json& v) { return v.value("verified", false); });
}

bool is_vs_config_scope(const nlohmann::json& scope) {
  const std::string name = scope.value("name", "");
  const std::string suffix = kVsConfigSuffix;
  const size_t at = name.rfind(suffix);
  if (at == std::string::npos || at == 0) return false;  // no name before the suffix
  return std::all_of(name.begin() + long(at + suffix.size()), name.end(),
                     [](char ch) { return ch >= '0' && ch <= '9'; });
}

std::string performance_report(const EnvInfo& env, const Ceilings* ce, const Records& recs, const std::string& note) {
  std::string s = "# Performance report\n\n";
  if (!note.empty()) s += "> " + note + "\n\n";
  s += "Protocol: warmup (a count of rounds, then more until a minimum of GPU time has passed), then timed repeats with CUDA events around each iteration; before each "
       "iteration the L2 is flushed by the mode in the `flush` column (`read` streams a buffer of 2x L2 with its "
       "lines marked evict_last, so that earlier lines marked so go too, then sets them back to "
       "normal priority: the cache is cold and clean; `plain` is one normal read, which lines marked evict_last "
       "survive; `write` is a memset, as Triton's do_bench). Bytes and flops come from the "
       "manifest formulas; `bytes` counts every slot, `GB/s valid` counts only valid (non -1) slots.\n\n";
  if (ce) {
    s += fmt::format(
        "## Ceilings measured on this device{}\n\n| ceiling | value |\n|---|---|\n"
        "| device-to-device copy (read+write) | {:.0f} GB/s |\n| read-only stream | {:.0f} GB/s |\n"
        "| GEMM ({}) | {:.1f} TFLOP/s |\n| empty kernel launch (event-timed median) | {:.2f} us |\n\n",
        ce->from_cache ? " (from cache, measured " + ce->measured_at + ")" : " (this run)", ce->copy_gbps,
        ce->read_gbps, ce->gemm_note.empty() ? "cuBLAS" : ce->gemm_note, ce->gemm_tflops, ce->empty_launch_us);
  }
  for (auto& r : recs)
    if (r.contains("bare_launch_host_us")) {
      s += fmt::format("Host cost of one bare cuLaunchKernel (empty kernel) in this run: {:.2f} us; the `host us/call` "
                       "column is the whole cached op call (validation, kernel lookup, launch).\n\n",
                       r["bare_launch_host_us"].get<double>());
      break;
    }
  s += "## Environment\n\n" + env_markdown(env) + "\n## Results\n\n";
  s += "| case | backend | median us | p90 us | min us | GB/s | GB/s valid | % copy | % read | % same-size copy | "
       "TFLOP/s | bound | host us/call | vs empty launch | verified | flush |\n";
  s += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (auto& r : recs) {
    auto t = r.value("timing", nlohmann::json::object());
    s += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                     r.value("case_id", "?"), r.value("backend", "?"), num(t, "median_us"), num(t, "p90_us"),
                     num(t, "min_us"), num(r, "gbps", "{:.0f}"), num(r, "gbps_valid", "{:.0f}"), pct(r, "frac_copy_bw"),
                     pct(r, "frac_read_bw"), pct(r, "frac_same_size_copy"), num(r, "tflops", "{:.3f}"), r.value("bound", "-"),
                     num(r, "host_overhead_us"), num(r, "vs_empty_launch", "{:.2f}x"),
                     r.contains("verified") ? (r["verified"].get<bool>() ? "yes" : "NO") : "-", r.value("flush", "-"));
    if (r.contains("error")) s += fmt::format("| ↳ error: {} |\n", r["error"].get<std::string>());
  }
  // Clock and power policy over each case's timed rounds (NVML counters).
  std::string slowed, unavailable;
  int recorded = 0;
  for (auto& r : recs) {
    if (!r.contains("gpu_state")) continue;
    const auto& g = r["gpu_state"];
    if (g.contains("unavailable")) {
      unavailable = g["unavailable"].get<std::string>();
      continue;
    }
    ++recorded;
    if (g.value("slowed", false))
      slowed += fmt::format("| {} | {} |\n", r.value("case_id", "?"), g.value("summary", std::string()));
  }
  if (recorded && !slowed.empty())
    s += "\n## Cases timed below full clock\n\nThe clock or power policy held these back while they were timed; "
         "compare them only with runs in the same state.\n\n| case | GPU during timing |\n|---|---|\n" + slowed;
  else if (recorded)
    s += fmt::format("\nNo case's clock was held back by power or temperature while timed ({} cases, NVML counters).\n",
                     recorded);
  else if (!unavailable.empty())
    s += "\nClock and power during timing: not recorded (" + unavailable + ").\n";
  // Composite ops: each scope timed under the same protocol (stages, end-to-end boundaries, baselines).
  bool any_scopes = false;
  for (auto& r : recs) any_scopes |= r.contains("scopes");
  if (any_scopes) {
    const double gemm = ce ? ce->gemm_tflops : 0;
    s += "\n## Scopes\n\nEach row timed under the protocol above; the first row of a case is its main line. "
         "`% GEMM ceiling`: TFLOP/s over the GEMM ceiling above. `vs`: this scope's median over the named "
         "scope's (below 1: faster).\n\n"
         "| case | scope | median us | p90 us | TFLOP/s | % GEMM ceiling | vs | covers |\n"
         "|---|---|---|---|---|---|---|---|\n";
    // TFLOP/s as a share of the ceiling, "-" without either.
    const auto of_gemm = [&](const nlohmann::json& j) {
      return gemm > 0 && j.contains("tflops") ? fmt::format("{:.1f}%", 100 * j["tflops"].get<double>() / gemm)
                                              : std::string("-");
    };
    for (auto& r : recs) {
      if (!r.contains("scopes")) continue;
      auto t = r.value("timing", nlohmann::json::object());
      const std::string main = r.value("scope", "kernel");
      s += fmt::format("| {} | {} | {} | {} | {} | {} | - | {} |\n", r.value("case_id", "?"),
                       main.substr(0, main.find(':')), num(t, "median_us"), num(t, "p90_us"), num(r, "tflops", "{:.1f}"),
                       of_gemm(r), main);
      for (auto& sc : r["scopes"]) {
        auto st = sc.value("timing", nlohmann::json::object());
        std::string vs = "-";
        if (sc.contains("vs") && !sc.contains("error")) {
          const std::string other = sc["vs"].get<std::string>();
          vs = scope_vs_text(r, sc);
          if (vs.empty()) vs = "- (" + other + " not timed)";
        }
        s += fmt::format("| | {} | {} | {} | {} | {} | {} | {} |\n", sc.value("name", "?"), num(st, "median_us"),
                         num(st, "p90_us"), num(sc, "tflops", "{:.1f}"), of_gemm(sc), vs,
                         sc.contains("error") ? "ERROR " + sc["error"].get<std::string>() : sc.value("note", ""));
      }
    }
  }
  s += "\n`% same-size copy`: time of a device copy moving the same number of bytes (half read, half written) "
       "under the same protocol, over the op's time: how close the op is to a plain stream of its own size, "
       "launch and ramp included. `vs empty launch`: the op's median over an empty kernel's, same protocol.\n";
  s += "\nBound rules: `latency` when the median is under 3x the empty-kernel launch; otherwise `memory` when "
       "flops/byte is under the ridge point (GEMM peak / copy bandwidth), else `compute`.\n";
  return s;
}

std::string design_report(const Manifest& m, const Records& bench, const Records& compile) {
  std::string s = "# Algorithm design report\n\n";
  for (auto& op : m.ops()) {
    s += "## " + op.name + "\n\n" + op.summary + "\n\n";
    for (const char* k : {"tiling", "memory", "bottleneck", "next_steps"}) {
      auto it = op.design.find(k);
      if (it != op.design.end()) s += fmt::format("**{}.** {}\n\n", k, it->second);
    }
    s += "### Kernels compiled (resources from ptxas)\n\n"
         "| kernel config | registers | spill B | smem B | stack B | SASS instructions |\n|---|---|---|---|---|---|\n";
    for (auto& r : compile)
      if (r.value("op", "") == op.name && !r.value("refused", false))  // a refused case compiled nothing
        s += fmt::format("| {} | {} | {} | {} | {} | {} |\n", r.value("config", "?"), r.value("registers", -1),
                         r.value("spill_store_bytes", 0), r.value("smem_bytes", 0), r.value("stack_bytes", 0),
                         r.value("code_bytes", 0) / 16);
    s += "\n### Measured bottleneck per workload\n\n| case | bound | rule | % copy bw |\n|---|---|---|---|\n";
    for (auto& r : bench)
      if (r.value("op", "") == op.name && r.contains("bound"))
        s += fmt::format("| {} | {} | {} | {} |\n", r.value("case_id", "?"), r.value("bound", "-"),
                         r.value("bound_rule", "-"), pct(r, "frac_copy_bw"));
    s += "\n";
  }
  return s;
}

}  // namespace tilecraft::harness
