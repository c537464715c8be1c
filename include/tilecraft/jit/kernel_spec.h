#pragma once
// What to compile: one instantiation of a kernel template from an embedded
// header. The host op fills this from a shape + config; the JIT turns it into
// a short generated source and a name expression for NVRTC.
#include <string>
#include <vector>

namespace tilecraft::jit {

struct KernelSpec {
  std::string header;                      // embedded path, e.g. "moe/reduce_fused.cuh"
  std::string function;                    // qualified template name, e.g. "tc::moe::reduce_fused_kernel"
  std::vector<std::string> template_args;  // C++ text of each template argument
  std::string config;                      // human-readable config, for tables and logs
  // The kernel begins with tc::grid_dependency_begin() (tile/grid_dependency.cuh):
  // it waits for the previous grid in the stream before touching global memory,
  // so the JIT may launch it as a programmatic dependent launch (sm_90+).
  bool waits_for_previous_grid = false;

  std::string name_expression() const;    // "&tc::moe::reduce_fused_kernel<float, 8>"
  std::string generated_source() const;   // include + forced instantiation
  std::string short_name() const;         // unqualified function name
};

}  // namespace tilecraft::jit
