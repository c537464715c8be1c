#include "tilecraft/jit/options.h"

#include <map>
#include <sstream>

#include "tilecraft/error.h"

namespace tilecraft::jit {
namespace {
bool parse_bool(const std::string& key, const std::string& v) {
  if (v.empty() || v == "1" || v == "true" || v == "on") return true;
  if (v == "0" || v == "false" || v == "off") return false;
  throw_arg_error(ErrorKind::kInvalidArgument, "compile options", key, "1/0/true/false/on/off", "'" + v + "'");
}
}  // namespace

// "release[,KEY[=V]...]": the set first (or left out: release), then
// options; one given twice must repeat its value (as --config keys: else
// the last would silently win).
CompileOptions CompileOptions::parse(const std::string& text) {
  CompileOptions o;
  std::stringstream ss(text);
  std::string part;
  std::map<std::string, std::string> seen;
  bool first = true;
  while (std::getline(ss, part, ',')) {
    const bool is_set = part == "release" || part == "profile" || part == "debug";
    if (first) {
      first = false;
      if (is_set) {
        o.set = part;
        continue;
      }
      if (part.find('=') == std::string::npos && part.find('-') == std::string::npos && part != "trace")
        throw_arg_error(ErrorKind::kInvalidArgument, "compile options", "set",
                        "release, profile or debug (or an option KEY=V)", "'" + part + "'");
    }
    if (is_set)
      throw_arg_error(ErrorKind::kInvalidArgument, "compile options", "set",
                      "the set (release, profile or debug) first, before any option", "'" + part + "' after options");
    auto eq = part.find('=');
    std::string key = part.substr(0, eq);
    std::string val = eq == std::string::npos ? "" : part.substr(eq + 1);
    const auto [at, fresh] = seen.emplace(key == "max-registers" ? "maxrregcount" : key, val);
    if (!fresh && at->second != val)
      throw_arg_error(ErrorKind::kInvalidArgument, "compile options", key, "one value (" + at->second + ")",
                      "a second, '" + val + "', in '" + text + "'");
    if (key == "maxrregcount" || key == "max-registers") {
      // The whole value, digits only: stoi would take "64x" as 64.
      const bool digits = !val.empty() && val.size() <= 9 && val.find_first_not_of("0123456789") == std::string::npos;
      const int n = digits ? std::stoi(val) : -1;
      if (n < 0 || n > 255)
        throw_arg_error(ErrorKind::kInvalidArgument, "compile options", key, "an integer 0..255 (0: no limit)",
                        "'" + val + "'");
      o.max_registers = n;
    } else if (key == "fast-math") o.fast_math = parse_bool(key, val);
    else if (key == "ftz") o.ftz = parse_bool(key, val);
    else if (key == "prec-div") o.prec_div = parse_bool(key, val);
    else if (key == "prec-sqrt") o.prec_sqrt = parse_bool(key, val);
    else if (key == "fmad") o.fmad = parse_bool(key, val);
    else if (key == "trace") o.trace = parse_bool(key, val);
    else if (key == "kernels") {
      if (val.empty())
        throw_arg_error(ErrorKind::kInvalidArgument, "compile options", key, "a directory of kernel headers", "''");
      o.kernel_dir = val;
    } else
      throw_arg_error(ErrorKind::kInvalidArgument, "compile options", key,
                      "one of maxrregcount, fast-math, ftz, prec-div, prec-sqrt, fmad, trace, kernels",
                      "'" + key + "'");
  }
  return o;
}

std::vector<std::string> CompileOptions::flags() const {
  std::vector<std::string> f{"-std=c++17", "-default-device"};
  if (set == "debug") f.push_back("-G");
  if (set == "profile") f.push_back("-lineinfo");
  if (max_registers > 0) f.push_back("-maxrregcount=" + std::to_string(max_registers));
  if (fast_math.value_or(false)) f.push_back("-use_fast_math");
  auto tf = [](bool b) { return b ? "true" : "false"; };
  if (ftz) f.push_back(std::string("-ftz=") + tf(*ftz));
  if (prec_div) f.push_back(std::string("-prec-div=") + tf(*prec_div));
  if (prec_sqrt) f.push_back(std::string("-prec-sqrt=") + tf(*prec_sqrt));
  if (fmad) f.push_back(std::string("-fmad=") + tf(*fmad));
  if (trace) f.push_back("-DTC_TRACE");
  return f;
}

std::string CompileOptions::str() const {
  std::string s = set;
  if (max_registers > 0) s += ",maxrregcount=" + std::to_string(max_registers);
  auto add = [&](const char* k, const std::optional<bool>& v) {
    if (v) s += fmt::format(",{}={}", k, *v ? 1 : 0);
  };
  add("fast-math", fast_math);
  add("ftz", ftz);
  add("prec-div", prec_div);
  add("prec-sqrt", prec_sqrt);
  add("fmad", fmad);
  if (trace) s += ",trace";
  if (!kernel_dir.empty()) s += ",kernels=" + kernel_dir;
  return s;
}

}  // namespace tilecraft::jit
