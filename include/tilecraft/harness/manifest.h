#pragma once
// The manifest: every op, its signature, variants, workloads, tolerances and
// roofline formulas. Loaded from YAML and validated at start-up; tests,
// benchmarks, reports and the CLI read shapes from here and nowhere else.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tilecraft/dtype.h"
#include "tilecraft/harness/expr.h"

namespace tilecraft::harness {

struct TensorSpec {
  std::string name;
  std::vector<std::string> dtypes;
  std::vector<std::string> shape;  // symbols or integers
  bool optional = false;
};

struct VariantSpec {
  std::string name;
  std::string description;
  std::vector<std::string> uses;      // optional inputs present in this variant
  std::string out_dtype = "input";    // "input" (same as the main input) or a dtype name
  Expr bytes, flops;
  std::optional<Expr> bytes_valid;    // minimum counting only valid index slots
  bool uses_input(const std::string& n) const;
};

struct WorkloadSpec {
  std::string name;
  std::map<std::string, int64_t> symbols;
  std::string dtype;
  std::map<std::string, std::string> params;  // e.g. routing
  // Kernel config overrides the workload pins (key `config`: "k=N;k=N" in a
  // shape string, the same string or a mapping in YAML), applied beside
  // --config (with_workload_config).
  std::map<std::string, int> config;
  std::vector<std::string> tags;
  std::string note;
  std::string source;  // file it came from, or "--shape"
  bool has_tag(const std::string& t) const;
};

struct Tolerance {
  std::string mode = "bitwise";  // bitwise | allclose
  double atol = 0, rtol = 0;
  // allclose: other atol / rtol for outputs of a given dtype (by_dtype in
  // the manifest), e.g. bf16's 8-bit significand against fp16's 11.
  std::map<DType, std::pair<double, double>> by_dtype;
  // The tolerance an output of dtype `t` is compared under.
  Tolerance for_dtype(DType t) const;
};

struct OpSpec {
  std::string name, family, summary, spec;
  std::vector<std::string> symbols, derived, param_keys;
  // Derived symbols estimated from the workload's own (manifest `estimates`:
  // an upper bound or a typical value, before any data exists): what sizes
  // tensors and work when a case is planned (check_case_fits, the CPU
  // backend's work limit).
  std::map<std::string, Expr> estimates;
  std::map<std::string, int64_t> defaults;
  std::map<std::string, std::string> param_defaults;
  std::vector<TensorSpec> inputs, outputs;
  std::vector<VariantSpec> variants;
  std::vector<WorkloadSpec> workloads;
  std::vector<std::string> default_tags;
  Tolerance tolerance;
  std::map<std::string, std::string> design;  // tiling, memory, bottleneck, next_steps
  std::string source;
  const VariantSpec* variant(const std::string& n) const;
  const WorkloadSpec* workload(const std::string& n) const;
};

class Manifest {
 public:
  // Loads the built-in manifest files plus `extra` files (a user's own ops or
  // workloads for existing ops). Throws Error(kManifest) naming file, op, field.
  static Manifest load(const std::vector<std::string>& extra = {});
  static std::string builtin_dir();
  void merge_file(const std::string& path);
  const std::vector<OpSpec>& ops() const { return ops_; }
  const OpSpec* find(const std::string& op) const;
  // "op1, op2, ...": what an error about an unknown op lists.
  std::string op_names() const;
  OpSpec* find(const std::string& op);

 private:
  std::vector<OpSpec> ops_;
};

// Parses --shape 'T=777,K=6,H=5120,dtype=bf16,routing=uniform' into a workload
// of `op`, with the op's defaults for symbols not given. Throws naming the bad key.
WorkloadSpec parse_shape_workload(const OpSpec& op, const std::string& text);
// Validates a workload against its op (all symbols known, integers positive
// or zero, dtype allowed). Throws Error(kManifest) with `where`.
void validate_workload(const OpSpec& op, const WorkloadSpec& w, const std::string& where);

}  // namespace tilecraft::harness
