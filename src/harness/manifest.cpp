#include "tilecraft/harness/manifest.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "tilecraft/dtype.h"
#include "tilecraft/error.h"
#include "tilecraft/jit/embedded_sources.h"

namespace tilecraft::harness {
namespace {

// Where a value sits, for error messages: "manifest/moe.yaml: op 'x': variants[2].bytes".
struct Ctx {
  std::string file, op, field;
  [[noreturn]] void fail(const std::string& what) const {
    std::string where = file;
    if (!op.empty()) where += ": op '" + op + "'";
    if (!field.empty()) where += ": " + field;
    throw Error(ErrorKind::kManifest, where + ": " + what);
  }
  Ctx at(const std::string& f) const { return {file, op, field.empty() ? f : field + "." + f}; }
  Ctx idx(size_t i) const { return {file, op, field + "[" + std::to_string(i) + "]"}; }
};

void only_keys(const YAML::Node& n, const Ctx& c, std::initializer_list<const char*> allowed) {
  if (!n.IsMap()) c.fail("expected a mapping");
  for (auto kv : n) {
    auto key = kv.first.as<std::string>();
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; })) {
      std::string list;
      for (auto a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
      c.at(key).fail("unknown key '" + key + "' (allowed: " + list + ")");
    }
  }
}

YAML::Node need(const YAML::Node& n, const char* key, const Ctx& c) {
  if (!n[key]) c.at(key).fail("missing required field");
  return n[key];
}

template <typename T>
T as(const YAML::Node& n, const Ctx& c, const char* what) {
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    // The value as written, where it is a scalar (an out-of-range number, a word).
    c.fail(std::string("expected ") + what + (n.IsScalar() ? ", got '" + n.Scalar() + "'" : ""));
  }
}

std::vector<std::string> str_list(const YAML::Node& n, const Ctx& c) {
  if (!n.IsSequence()) c.fail("expected a list");
  std::vector<std::string> out;
  for (size_t i = 0; i < n.size(); ++i) out.push_back(as<std::string>(n[i], c.idx(i), "a string"));
  return out;
}

void check_dtype(const std::string& d, const Ctx& c) {
  if (!parse_dtype(d)) c.fail("unknown dtype '" + d + "' (known: fp32, bf16, fp16, fp8_e4m3, int32, int64)");
}

Expr parse_expr(const YAML::Node& n, const Ctx& c, const std::set<std::string>& symbols) {
  std::string text = as<std::string>(n, c, "an expression string");
  Expr e;
  try {
    e = Expr::parse(text);
  } catch (const std::invalid_argument& ex) {
    c.fail(ex.what());
  }
  for (auto& id : e.identifiers())
    if (!symbols.count(id)) c.fail("expression '" + text + "' uses unknown symbol '" + id + "'");
  return e;
}

std::vector<TensorSpec> parse_tensors(const YAML::Node& n, const Ctx& c) {
  if (!n.IsSequence()) c.fail("expected a list of tensors");
  std::vector<TensorSpec> out;
  for (size_t i = 0; i < n.size(); ++i) {
    Ctx ci = c.idx(i);
    only_keys(n[i], ci, {"name", "dtype", "shape", "optional"});
    TensorSpec t;
    t.name = as<std::string>(need(n[i], "name", ci), ci.at("name"), "a name");
    t.dtypes = str_list(need(n[i], "dtype", ci), ci.at("dtype"));
    for (auto& d : t.dtypes) check_dtype(d, ci.at("dtype"));
    t.shape = str_list(need(n[i], "shape", ci), ci.at("shape"));
    t.optional = n[i]["optional"] ? as<bool>(n[i]["optional"], ci.at("optional"), "true or false") : false;
    out.push_back(t);
  }
  return out;
}

// Reads one workload map: known keys are name/tags/dtype/note, op params, and symbols.
// A workload's `config`: "KEY=N;KEY=N" (semicolons, so that it fits in a
// --shape string, whose pairs are split at commas) or a YAML mapping of
// KEY: N. Each key once; values are integers (which keys an op takes, and
// which values, its adapter checks when the case runs).
std::map<std::string, int> parse_workload_config(const YAML::Node& n, const Ctx& c) {
  std::map<std::string, int> r;
  const auto add = [&](const std::string& key, const std::string& text) {
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (key.empty() || used == 0 || used != text.size())
      c.fail("expected KEY=INTEGER entries separated by ';' (e.g. 'block_m=64;stages=3'), got '" + key + "=" + text +
             "'");
    if (!r.emplace(key, v).second) c.fail("config key '" + key + "' given twice");
  };
  if (n.IsMap()) {
    for (auto kv : n) add(kv.first.as<std::string>(), kv.second.as<std::string>());
    return r;
  }
  const std::string text = as<std::string>(n, c, "KEY=INTEGER entries separated by ';', or a mapping");
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(';', start), text.size());
    const std::string kv = text.substr(start, end - start);
    if (!kv.empty()) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos)
        c.fail("expected KEY=INTEGER entries separated by ';' (e.g. 'block_m=64;stages=3'), got '" + kv + "'");
      add(kv.substr(0, eq), kv.substr(eq + 1));
    }
    start = end + 1;
  }
  return r;
}

WorkloadSpec parse_workload(const YAML::Node& n, const Ctx& c, const OpSpec& op) {
  if (!n.IsMap()) c.fail("expected a mapping");
  WorkloadSpec w;
  w.source = c.file;
  w.params = op.param_defaults;
  w.symbols = op.defaults;
  for (auto kv : n) {
    std::string key = kv.first.as<std::string>();
    Ctx ck = c.at(key);
    if (key == "name") w.name = as<std::string>(kv.second, ck, "a string");
    else if (key == "tags") w.tags = str_list(kv.second, ck);
    else if (key == "dtype") w.dtype = as<std::string>(kv.second, ck, "a dtype name");
    else if (key == "note") w.note = as<std::string>(kv.second, ck, "a string");
    else if (key == "config") w.config = parse_workload_config(kv.second, ck);
    else if (std::count(op.param_keys.begin(), op.param_keys.end(), key))
      w.params[key] = as<std::string>(kv.second, ck, "a string");
    else if (std::count(op.symbols.begin(), op.symbols.end(), key))
      w.symbols[key] = as<int64_t>(kv.second, ck, "an integer");
    else {
      std::string known = "name, tags, dtype, note, config";
      for (auto& s : op.symbols) known += ", " + s;
      for (auto& s : op.param_keys) known += ", " + s;
      ck.fail("unknown key '" + key + "' (known: " + known + ")");
    }
  }
  // Ops whose main input has one dtype need no dtype per workload.
  if (w.dtype.empty() && !op.inputs.empty() && op.inputs.front().dtypes.size() == 1) w.dtype = op.inputs.front().dtypes[0];
  return w;
}

// Expands a matrix: the cartesian product of its axes over `fixed`.
void expand_matrix(const YAML::Node& m, const Ctx& c, OpSpec& op) {
  only_keys(m, c, {"prefix", "tags", "fixed", "axes"});
  std::string prefix = as<std::string>(need(m, "prefix", c), c.at("prefix"), "a string");
  YAML::Node axes = need(m, "axes", c);
  if (!axes.IsMap()) c.at("axes").fail("expected a mapping of axis -> list");
  if (m["fixed"] && !m["fixed"].IsMap()) c.at("fixed").fail("expected a mapping of field -> value");
  // Each axis value: a scalar, or a mapping of fields to scalars (several
  // fields that move together); its text goes into the workload's name.
  std::vector<std::pair<std::string, YAML::Node>> ax;
  for (auto kv : axes) {
    const std::string axis = as<std::string>(kv.first, c.at("axes"), "an axis name");
    const Ctx ac = c.at("axes." + axis);
    if (!kv.second.IsSequence() || kv.second.size() == 0) ac.fail("expected a non-empty list");
    for (size_t i = 0; i < kv.second.size(); ++i) {
      const YAML::Node v = kv.second[i];
      bool ok = v.IsScalar() || (v.IsMap() && v.size() > 0);
      if (v.IsMap())
        for (auto f : v) ok = ok && f.first.IsScalar() && f.second.IsScalar();
      if (!ok) ac.idx(i).fail("expected a value, or a mapping of field -> value");
    }
    ax.emplace_back(axis, kv.second);
  }
  std::vector<size_t> idx(ax.size(), 0);
  for (;;) {
    YAML::Node w = m["fixed"] ? YAML::Clone(m["fixed"]) : YAML::Node(YAML::NodeType::Map);
    std::string name = prefix;
    for (size_t a = 0; a < ax.size(); ++a) {
      YAML::Node v = ax[a].second[idx[a]];
      if (v.IsMap()) {
        for (auto kv : v) {
          w[kv.first.as<std::string>()] = kv.second;
          name += "-" + kv.first.as<std::string>() + kv.second.as<std::string>();
        }
      } else {
        w[ax[a].first] = v;
        name += "-" + ax[a].first + v.as<std::string>();
      }
    }
    w["name"] = name;
    if (m["tags"]) w["tags"] = m["tags"];
    op.workloads.push_back(parse_workload(w, c.at(name), op));
    size_t a = 0;
    for (; a < ax.size(); ++a) {
      if (++idx[a] < ax[a].second.size()) break;
      idx[a] = 0;
    }
    if (a == ax.size()) break;
  }
}

OpSpec parse_op(const YAML::Node& n, const std::string& file) {
  Ctx c{file, "", ""};
  if (!n.IsMap()) c.fail("each entry of 'ops' must be a mapping");
  OpSpec op;
  op.source = file;
  op.name = as<std::string>(need(n, "name", c), c.at("name"), "a string");
  c.op = op.name;
  only_keys(n, c, {"name", "family", "summary", "spec", "symbols", "derived", "estimates", "defaults", "params",
                   "default_tags", "inputs", "outputs", "tolerance", "variants", "workloads", "matrices", "design"});
  op.family = as<std::string>(need(n, "family", c), c.at("family"), "a string");
  op.summary = n["summary"] ? as<std::string>(n["summary"], c.at("summary"), "a string") : "";
  op.spec = n["spec"] ? as<std::string>(n["spec"], c.at("spec"), "a string") : "";
  op.symbols = str_list(need(n, "symbols", c), c.at("symbols"));
  if (n["derived"]) op.derived = str_list(n["derived"], c.at("derived"));
  if (const YAML::Node es = n["estimates"]) {
    Ctx ce = c.at("estimates");
    if (!es.IsMap()) ce.fail("expected a map from derived symbol to an expression of the op's symbols");
    const std::set<std::string> own(op.symbols.begin(), op.symbols.end());
    for (auto kv : es) {
      const std::string k = kv.first.as<std::string>();
      if (!std::count(op.derived.begin(), op.derived.end(), k))
        ce.at(k).fail("expected a derived symbol of the op, got '" + k + "'");
      op.estimates[k] = parse_expr(kv.second, ce.at(k), own);
    }
  }
  if (n["defaults"])
    for (auto kv : n["defaults"]) {
      std::string k = kv.first.as<std::string>();
      if (!std::count(op.symbols.begin(), op.symbols.end(), k)) c.at("defaults." + k).fail("not a declared symbol");
      op.defaults[k] = as<int64_t>(kv.second, c.at("defaults." + k), "an integer");
    }
  if (n["params"])
    for (auto kv : n["params"]) {
      op.param_keys.push_back(kv.first.as<std::string>());
      op.param_defaults[kv.first.as<std::string>()] = as<std::string>(kv.second, c.at("params"), "a string");
    }
  op.default_tags = n["default_tags"] ? str_list(n["default_tags"], c.at("default_tags")) : std::vector<std::string>{"smoke"};
  op.inputs = parse_tensors(need(n, "inputs", c), c.at("inputs"));
  op.outputs = parse_tensors(need(n, "outputs", c), c.at("outputs"));
  if (n["tolerance"]) {
    Ctx ct = c.at("tolerance");
    only_keys(n["tolerance"], ct, {"mode", "atol", "rtol", "by_dtype"});
    op.tolerance.mode = as<std::string>(need(n["tolerance"], "mode", ct), ct.at("mode"), "bitwise or allclose");
    if (op.tolerance.mode != "bitwise" && op.tolerance.mode != "allclose")
      ct.at("mode").fail("expected bitwise or allclose, got '" + op.tolerance.mode + "'");
    if (n["tolerance"]["atol"]) op.tolerance.atol = as<double>(n["tolerance"]["atol"], ct.at("atol"), "a number");
    if (n["tolerance"]["rtol"]) op.tolerance.rtol = as<double>(n["tolerance"]["rtol"], ct.at("rtol"), "a number");
    if (const YAML::Node b = n["tolerance"]["by_dtype"]) {
      Ctx cb = ct.at("by_dtype");
      if (op.tolerance.mode != "allclose") cb.fail("per-dtype tolerances need mode allclose");
      if (!b.IsMap()) cb.fail("expected a map from dtype to {atol, rtol}");
      for (auto kv : b) {
        const std::string name = kv.first.as<std::string>();
        Ctx cd = cb.at(name);
        const auto dt = parse_dtype(name);
        if (!dt || !is_float(*dt)) cd.fail("expected a float dtype name, got '" + name + "'");
        only_keys(kv.second, cd, {"atol", "rtol"});
        op.tolerance.by_dtype[*dt] = {as<double>(need(kv.second, "atol", cd), cd.at("atol"), "a number"),
                                      as<double>(need(kv.second, "rtol", cd), cd.at("rtol"), "a number")};
      }
    }
  }
  std::set<std::string> syms(op.symbols.begin(), op.symbols.end());
  syms.insert(op.derived.begin(), op.derived.end());
  YAML::Node vs = need(n, "variants", c);
  if (!vs.IsSequence() || vs.size() == 0) c.at("variants").fail("expected a non-empty list");
  for (size_t i = 0; i < vs.size(); ++i) {
    Ctx cv = c.at("variants").idx(i);
    only_keys(vs[i], cv, {"name", "description", "uses", "out_dtype", "bytes", "bytes_valid", "flops"});
    VariantSpec v;
    v.name = as<std::string>(need(vs[i], "name", cv), cv.at("name"), "a string");
    if (vs[i]["description"]) v.description = as<std::string>(vs[i]["description"], cv.at("description"), "a string");
    if (vs[i]["uses"]) v.uses = str_list(vs[i]["uses"], cv.at("uses"));
    for (auto& u : v.uses) {
      auto it = std::find_if(op.inputs.begin(), op.inputs.end(), [&](auto& t) { return t.name == u; });
      if (it == op.inputs.end() || !it->optional) cv.at("uses").fail("'" + u + "' is not an optional input of the op");
    }
    if (vs[i]["out_dtype"]) {
      v.out_dtype = as<std::string>(vs[i]["out_dtype"], cv.at("out_dtype"), "a dtype or 'input'");
      if (v.out_dtype != "input") check_dtype(v.out_dtype, cv.at("out_dtype"));
    }
    v.bytes = parse_expr(need(vs[i], "bytes", cv), cv.at("bytes"), syms);
    v.flops = parse_expr(need(vs[i], "flops", cv), cv.at("flops"), syms);
    if (vs[i]["bytes_valid"]) v.bytes_valid = parse_expr(vs[i]["bytes_valid"], cv.at("bytes_valid"), syms);
    op.variants.push_back(std::move(v));
  }
  if (n["workloads"]) {
    YAML::Node ws = n["workloads"];
    if (!ws.IsSequence()) c.at("workloads").fail("expected a list");
    for (size_t i = 0; i < ws.size(); ++i) op.workloads.push_back(parse_workload(ws[i], c.at("workloads").idx(i), op));
  }
  if (n["matrices"]) {
    YAML::Node ms = n["matrices"];
    if (!ms.IsSequence()) c.at("matrices").fail("expected a list");
    for (size_t i = 0; i < ms.size(); ++i) expand_matrix(ms[i], c.at("matrices").idx(i), op);
  }
  if (n["design"]) {
    only_keys(n["design"], c.at("design"), {"tiling", "memory", "bottleneck", "next_steps"});
    for (auto kv : n["design"]) {
      const std::string key = kv.first.as<std::string>();
      op.design[key] = as<std::string>(kv.second, c.at("design." + key), "a text");
    }
  }
  for (auto& w : op.workloads) validate_workload(op, w, file + ": op '" + op.name + "': workload '" + w.name + "'");
  return op;
}

}  // namespace

bool VariantSpec::uses_input(const std::string& n) const { return std::count(uses.begin(), uses.end(), n) > 0; }
bool WorkloadSpec::has_tag(const std::string& t) const { return std::count(tags.begin(), tags.end(), t) > 0; }

const VariantSpec* OpSpec::variant(const std::string& n) const {
  for (auto& v : variants)
    if (v.name == n) return &v;
  return nullptr;
}
const WorkloadSpec* OpSpec::workload(const std::string& n) const {
  for (auto& w : workloads)
    if (w.name == n) return &w;
  return nullptr;
}

void validate_workload(const OpSpec& op, const WorkloadSpec& w, const std::string& where) {
  auto fail = [&](const std::string& what) { throw Error(ErrorKind::kManifest, where + ": " + what); };
  if (w.name.empty()) fail("missing name");
  for (auto& s : op.symbols) {
    auto it = w.symbols.find(s);
    if (it == w.symbols.end()) fail("symbol '" + s + "' has no value and no default");
    if (it->second < 0) fail("symbol '" + s + "' must be >= 0, got " + std::to_string(it->second));
  }
  if (w.dtype.empty()) fail("missing dtype");
  const auto& main_dtypes = op.inputs.front().dtypes;
  if (!std::count(main_dtypes.begin(), main_dtypes.end(), w.dtype)) {
    std::string allowed;
    for (auto& d : main_dtypes) allowed += (allowed.empty() ? "" : ", ") + d;
    fail("dtype '" + w.dtype + "' is not one of " + op.inputs.front().name + "'s dtypes (" + allowed + ")");
  }
}

std::string Manifest::builtin_dir() { return std::string(TILECRAFT_SOURCE_DIR) + "/manifest"; }

namespace {
void merge_node(std::vector<OpSpec>& ops, const YAML::Node& root, const std::string& file) {
  Ctx c{file, "", ""};
  if (!root.IsMap()) c.fail("expected a mapping with 'ops' and/or 'workloads'");
  only_keys(root, c, {"ops", "workloads"});
  if (root["ops"]) {
    for (size_t i = 0; i < root["ops"].size(); ++i) {
      OpSpec op = parse_op(root["ops"][i], file);
      if (std::any_of(ops.begin(), ops.end(), [&](auto& o) { return o.name == op.name; }))
        Ctx{file, op.name, "name"}.fail("op already defined (by " +
                                        std::find_if(ops.begin(), ops.end(), [&](auto& o) { return o.name == op.name; })->source + ")");
      ops.push_back(std::move(op));
    }
  }
  // Extra workloads for existing ops: {workloads: {op_name: [ {...}, ... ]}}
  if (root["workloads"]) {
    for (auto kv : root["workloads"]) {
      std::string name = kv.first.as<std::string>();
      auto it = std::find_if(ops.begin(), ops.end(), [&](auto& o) { return o.name == name; });
      if (it == ops.end()) c.at("workloads." + name).fail("no op named '" + name + "'");
      Ctx cw{file, name, "workloads"};
      for (size_t i = 0; i < kv.second.size(); ++i) {
        WorkloadSpec w = parse_workload(kv.second[i], cw.idx(i), *it);
        validate_workload(*it, w, file + ": op '" + name + "': workload '" + w.name + "'");
        if (it->workload(w.name)) cw.idx(i).fail("workload '" + w.name + "' already exists");
        it->workloads.push_back(std::move(w));
      }
    }
  }
}

YAML::Node parse_yaml(const std::string& text, const std::string& file) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(ErrorKind::kManifest, file + ": YAML syntax error: " + e.what());
  }
}
}  // namespace

void Manifest::merge_file(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw Error(ErrorKind::kManifest, path + ": cannot read manifest file");
  } catch (const YAML::Exception& e) {
    throw Error(ErrorKind::kManifest, path + ": YAML syntax error: " + e.what());
  }
  try {
    merge_node(ops_, root, path);
  } catch (const YAML::Exception& e) {
    // A shape the checks above did not foresee (a scalar where a mapping
    // belongs, ...): still an error that names the file, never a YAML one.
    throw Error(ErrorKind::kManifest, path + ": unexpected structure: " + e.what());
  }
}

Manifest Manifest::load(const std::vector<std::string>& extra) {
  Manifest m;
  // TILECRAFT_MANIFEST_DIR replaces the embedded manifest (for editing without a rebuild).
  if (const char* dir = std::getenv("TILECRAFT_MANIFEST_DIR"); dir && *dir) {
    for (const auto& s : jit::embedded_manifest()) m.merge_file(std::string(dir) + "/" + s.path);
  } else {
    for (const auto& s : jit::embedded_manifest())
      merge_node(m.ops_, parse_yaml(s.text, std::string("manifest/") + s.path), std::string("manifest/") + s.path);
  }
  for (auto& f : extra) m.merge_file(f);
  return m;
}

std::string Manifest::op_names() const {
  std::string s;
  for (const OpSpec& o : ops_) s += (s.empty() ? "" : ", ") + o.name;
  return s;
}

const OpSpec* Manifest::find(const std::string& op) const {
  for (auto& o : ops_)
    if (o.name == op) return &o;
  return nullptr;
}
OpSpec* Manifest::find(const std::string& op) {
  for (auto& o : ops_)
    if (o.name == op) return &o;
  return nullptr;
}

Tolerance Tolerance::for_dtype(DType t) const {
  Tolerance r = *this;
  if (auto it = by_dtype.find(t); it != by_dtype.end()) r.atol = it->second.first, r.rtol = it->second.second;
  r.by_dtype.clear();
  return r;
}

WorkloadSpec parse_shape_workload(const OpSpec& op, const std::string& text) {
  YAML::Node n(YAML::NodeType::Map);
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!part.empty()) {
      size_t eq = part.find('=');
      if (eq == std::string::npos || eq == 0)
        throw_arg_error(ErrorKind::kInvalidArgument, op.name, "--shape", "KEY=VALUE pairs separated by commas",
                        "'" + part + "'");
      const std::string key = part.substr(0, eq);
      if (n[key])  // (else the last one would silently win)
        throw_arg_error(ErrorKind::kInvalidArgument, op.name, "--shape", "each key once",
                        "'" + key + "' twice in '" + text + "'");
      n[key] = part.substr(eq + 1);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  n["name"] = "shape:" + text;
  if (!n["tags"]) n["tags"] = std::vector<std::string>{"adhoc"};
  WorkloadSpec w;
  try {
    w = parse_workload(n, Ctx{"--shape", op.name, ""}, op);
  } catch (const Error& e) {
    throw Error(ErrorKind::kInvalidArgument, e.what());
  }
  w.source = "--shape";
  try {
    validate_workload(op, w, "--shape '" + text + "' for op '" + op.name + "'");
  } catch (const Error& e) {
    throw Error(ErrorKind::kInvalidArgument, e.what());
  }
  return w;
}

}  // namespace tilecraft::harness
