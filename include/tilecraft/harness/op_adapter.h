#pragma once
// What the harness needs from each op: generate a case's inputs from its
// workload/variant/seed, run the golden, run either backend, check against an
// independent float64 evaluation, and name the kernels a workload needs. Tests,
// benchmarks, `compile` and `inspect` all go through this one interface.
#include <cuda.h>

#include <functional>
#include <map>

#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "tilecraft/harness/manifest.h"
#include "tilecraft/jit/kernel_spec.h"
#include "tilecraft/jit/options.h"
#include "tilecraft/tensor.h"

namespace tilecraft::harness {

struct Case {
  const OpSpec* op = nullptr;
  const VariantSpec* variant = nullptr;
  const WorkloadSpec* workload = nullptr;
  uint64_t seed = 0;
  std::string id() const;  // "op/variant/workload"
};

struct OutputDesc {
  std::string name;  // manifest name
  DType dtype;
  Shape shape;
};

using Tensors = std::map<std::string, TensorView>;  // by manifest name

// An input generated where it is used and never materialised on the host:
// element i = lo + (hi - lo) * random_unit(seed, stream, i), rounded to dtype
// (fill_uniform / fill_uniform_device, bit-identical). Weight sets of real
// models (tens of GB) live only on the device; goldens regenerate the values
// they need from the same formula.
struct GeneratedInput {
  DType dtype;
  Shape shape;
  uint64_t stream;
  float lo, hi;
};

struct CaseData {
  uint64_t seed = 0;                         // the case's seed (generated inputs use it)
  std::map<std::string, HostTensor> inputs;  // by manifest name; absent optionals are absent
  std::map<std::string, GeneratedInput> generated;  // inputs made on the device (or host for the CPU backend)
  std::vector<OutputDesc> outputs;
  std::map<std::string, double> symbols;     // workload symbols + derived + op parameters, as generated
};

struct RunOptions {
  bool checked = false;
  jit::CompileOptions compile;
  std::map<std::string, int> config;  // kernel config overrides, op-specific keys
  // Where `config` came from, for errors about its keys: the flag, or with
  // with_workload_config also the workload's own `config`.
  std::string config_arg = "--config";
  // The compute capability (major) whose kernels `kernels()` lists: the
  // target of `compile` / `inspect --arch`; 0 = the GPU's, or 9 without one.
  int cc_major = 0;
  // The GPU (CUDA ordinal) the harness runs cases on: their tensors, stream,
  // timing and counters (--device). Ops run on their tensors' GPU.
  int device = 0;
  // The CPU backend runs because no GPU is usable, not because it was asked
  // for: model-sized cases are refused (check_cpu_stand_in_work).
  bool cpu_stand_in = false;
};

// `o` with the case's workload config (WorkloadSpec::config) added to its
// overrides: what every kernel listing, run and timing of the case takes. A
// key both give with different values is an error naming the two (which
// one was meant?); the same value given twice is one override.
RunOptions with_workload_config(const Case& c, const RunOptions& o);

// Independent check of an output against a float64 evaluation.
struct F64Check {
  double max_abs_err = 0;
  double max_excess = 0;  // max of |out - ref| / allowed; <= 1 passes
  int64_t num_failed = 0;
  int64_t first_failed = -1;
  // One element: |out - ref| = err against its allowed error (> 0); a NaN
  // error counts as infinite and fails.
  void add(double err, double allowed, int64_t where) {
    max_abs_err = std::max(max_abs_err, std::isnan(err) ? INFINITY : err);
    max_excess = std::max(max_excess, std::isnan(err) ? INFINITY : err / allowed);
    if (!(err <= allowed)) {
      if (first_failed < 0) first_failed = where;
      ++num_failed;
    }
  }
  // Folds in the check of a later part of the output (parts checked apart,
  // merged in order: first_failed stays the first in that order).
  void merge(const F64Check& later) {
    max_abs_err = std::max(max_abs_err, later.max_abs_err);
    max_excess = std::max(max_excess, later.max_excess);
    if (first_failed < 0) first_failed = later.first_failed;
    num_failed += later.num_failed;
  }
};

// A further timed region `bench` measures under the same protocol as the
// op itself: a stage of a composite op, an end-to-end boundary, a baseline.
struct TimedScope {
  std::string name;
  std::string note;  // what the scope includes
  std::function<void(CUstream)> fn;
  double flops = 0;  // for TFLOP/s, when meaningful
  // Another scope of the same case that this one is judged against (the
  // reports print this one's median over that one's), or empty.
  std::string vs;
};

class OpAdapter {
 public:
  virtual ~OpAdapter() = default;
  virtual std::string name() const = 0;
  virtual CaseData generate(const Case& c) const = 0;
  virtual void golden(const CaseData& d, const Tensors& out) const = 0;
  // The op's public entry on either backend (tensors all on one device; `d`
  // supplies the case's parameters, its tensors are the host copies).
  virtual void run(const CaseData& d, const Tensors& in, const Tensors& out, DeviceType backend, CUstream stream,
                   const RunOptions& o) const = 0;
  virtual F64Check check_f64(const CaseData& d, const Tensors& out) const = 0;
  // Compares backend outputs with the golden's and fills the record's
  // comparison fields. The default compares every output under the op's
  // tolerance; ops whose outputs admit several right answers (index outputs
  // at near-ties) override it.
  virtual bool compare(const CaseData& d, const OpSpec& op, const Tensors& want, const Tensors& got,
                       nlohmann::json& record) const;
  // What the op's own timed call covers (reports name it).
  virtual std::string main_scope() const { return "kernel"; }
  // Extra scopes for `bench` on CUDA; `in`/`out` are the case's device tensors.
  // Scopes may overwrite outputs: the harness re-verifies after them.
  virtual std::vector<TimedScope> bench_scopes(const CaseData&, const Tensors&, const Tensors&,
                                               const RunOptions&) const {
    return {};
  }
  // Kernels a case needs, derived from the workload alone (no data, no GPU).
  virtual std::vector<jit::KernelSpec> kernels(const Case& c, const RunOptions& o) const = 0;
};

// Elements [begin, begin + n) of a generated input, as fp32.
void generated_values(const GeneratedInput& g, uint64_t seed, int64_t begin, int64_t n, float* out);
// The whole input on the host (CPU backend, small cases).
HostTensor materialize(const GeneratedInput& g, uint64_t seed);

// Compares one tensor with its golden (bitwise or allclose); fills `r` with
// max errors, counts, first failure and non-finite count. True when all match.
bool compare_tensor(const Tolerance& tol, const TensorView& want, const TensorView& got, nlohmann::json& r);

// Registry of ops that have an adapter; throws naming the op if none.
const OpAdapter& adapter_for(const std::string& op);
bool has_adapter(const std::string& op);

}  // namespace tilecraft::harness
