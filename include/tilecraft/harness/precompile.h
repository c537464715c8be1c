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

// A case whose kernels an op cannot even specify (a --config or a random
// draw's config it refuses): its id and the op's message.
struct RefusedCase {
  std::string op;
  std::string case_id;
  std::string error;
};

// The distinct kernels of `cases` (for tests, checked, and benchmarks,
// unchecked, with `o`'s config and compile options), compiled for `arch` on
// up to `threads` threads (0: the machine's cores, at most 16). Compile
// errors are returned, not thrown. A case whose kernels cannot be specified
// is skipped (running it reports the error) and, with `refused`, listed
// there once.
std::vector<CompiledCaseKernel> precompile(const std::vector<Case>& cases, RunOptions o, const std::string& arch,
                                           unsigned threads = 0, std::vector<RefusedCase>* refused = nullptr);

}  // namespace tilecraft::harness
