#pragma once
// NVRTC compilation: source + options + arch -> cubin (or PTX), with the
// resource usage ptxas reports. Runs without a GPU.
#include <string>
#include <vector>

#include "tilecraft/jit/kernel_spec.h"
#include "tilecraft/jit/options.h"

namespace tilecraft::jit {

struct Resources {
  int registers = -1;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int smem_static_bytes = 0;
  int stack_frame_bytes = 0;  // local memory per thread
  int cmem_bytes = 0;
  // SASS bytes of the entry function (16 per instruction on sm_70 and
  // later; 0 for PTX). Code that runs once per call is fetched cold when
  // the call streams more than L2 between calls: at decode sizes its size,
  // not its work, can set the latency.
  int code_bytes = 0;
};

struct CompileOutput {
  std::string binary;        // cubin (real arch) or PTX text (virtual arch)
  std::string lowered_name;  // mangled entry name for cuModuleGetFunction
  std::string log;           // NVRTC + ptxas messages
  Resources resources;
  double compile_ms = 0;
};

std::string cuda_home();           // $CUDA_HOME, else the toolkit found at build time
std::string nvrtc_version();       // "13.0"
// Validates "sm_90a", "sm_80", "compute_90a"; throws naming `op` and `arg`
// otherwise (the CLI passes its command and "--arch").
void check_arch(const std::string& arch, const std::string& op = "jit", const std::string& arg = "arch");
// The compute capability's major number of a target arch (sm_90a -> 9,
// compute_80 -> 8, sm_100 -> 10); an invalid arch is check_arch's error.
int arch_cc_major(const std::string& arch);

// Compiles spec for `arch` ("sm_90a" -> cubin; "compute_90a" -> PTX).
CompileOutput nvrtc_compile(const KernelSpec& spec, const CompileOptions& options, const std::string& arch);

// Parses ptxas -v output (as NVRTC logs it).
Resources parse_ptxas_resources(const std::string& log);
// Size of section ".text.<function>" of an ELF64 cubin, 0 where the cubin
// has no such section or is not a well-formed ELF64 file.
int cubin_function_bytes(const std::string& cubin, const std::string& function);

}  // namespace tilecraft::jit
