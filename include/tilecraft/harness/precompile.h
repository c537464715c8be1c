#pragma once
// Compiling the kernels of many cases at once, on a pool of threads, into the
// JIT's caches: NVRTC takes ~1 s per grouped-GEMM kernel, and a fresh
// machine's test run otherwise compiles them one by one as cases reach them.
#include <string>
#include <vector>

#include "tilecraft/harness/op_adapter.h"
#include "tilecraft/jit/jit.h"

namespace tilecraft::harness {

struct CompiledCaseKernel {
  std::string op;
  jit::KernelSpec spec;
  std::shared_ptr<const jit::CompiledKernel> kernel;  // null when it failed
  std::string error;
};

// The distinct kernels of `cases` (for tests, checked, and benchmarks,
// unchecked, with `o`'s config and compile options), compiled for `arch` on
// up to `threads` threads (0: the machine's cores, at most 16). Compile
// errors are returned, not thrown. A case whose kernels cannot even be
// specified (a refused --config) throws when `throw_spec_errors`, else is
// skipped: running it reports the error.
std::vector<CompiledCaseKernel> precompile(const std::vector<Case>& cases, RunOptions o, const std::string& arch,
                                           unsigned threads = 0, bool throw_spec_errors = false);

}  // namespace tilecraft::harness
