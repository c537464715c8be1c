#include <nvrtc.h>

#include <chrono>
#include <cstdlib>

#include "tilecraft/error.h"
#include "tilecraft/jit/compiler.h"
#include "tilecraft/jit/embedded_sources.h"

namespace tilecraft::jit {
namespace {
void check_nvrtc(nvrtcResult r, const char* what, const std::string& context) {
  if (r != NVRTC_SUCCESS)
    throw Error(ErrorKind::kCuda, fmt::format("jit: {} failed for {}: {}", what, context, nvrtcGetErrorString(r)));
}

// NVRTC programs are released on every exit path.
struct Program {
  nvrtcProgram p = nullptr;
  ~Program() {
    if (p) nvrtcDestroyProgram(&p);
  }
};
}  // namespace

std::string cuda_home() {
  if (const char* e = std::getenv("CUDA_HOME"); e && *e) return e;
  if (const char* e = std::getenv("CUDA_PATH"); e && *e) return e;
  return TILECRAFT_CUDA_HOME_DEFAULT;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

// No std::regex in the library: its template instantiations are process-wide
// (GNU unique) symbols and clash with another libstdc++ build's copies when
// the Python extension shares a process with PyTorch (a crash seen on the H200).
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The first number written directly before `suffix` in `log`, or -1.
int number_before(const std::string& log, const std::string& suffix) {
  for (size_t at = log.find(suffix); at != std::string::npos; at = log.find(suffix, at + 1)) {
    size_t b = at;
    while (b > 0 && is_digit(log[b - 1])) --b;
    if (b < at && at - b < 10) return std::stoi(log.substr(b, at - b));
  }
  return -1;
}

}  // namespace

void check_arch(const std::string& arch) {
  // (sm|compute)_ then 2-3 digits then an optional 'a' or 'f'.
  size_t i = arch.rfind("sm_", 0) == 0 ? 3 : arch.rfind("compute_", 0) == 0 ? 8 : std::string::npos;
  size_t digits = 0;
  if (i != std::string::npos)
    while (i + digits < arch.size() && is_digit(arch[i + digits])) ++digits;
  const size_t rest = i == std::string::npos ? 0 : arch.size() - i - digits;
  const bool ok = i != std::string::npos && digits >= 2 && digits <= 3 &&
                  (rest == 0 || (rest == 1 && (arch.back() == 'a' || arch.back() == 'f')));
  if (!ok)
    throw_arg_error(ErrorKind::kInvalidArgument, "jit", "arch", "sm_XY[a] or compute_XY[a], e.g. sm_90a",
                    "'" + arch + "'");
}

Resources parse_ptxas_resources(const std::string& log) {
  Resources r;
  auto set = [](int& field, int v) {
    if (v >= 0) field = v;
  };
  set(r.registers, number_before(log, " registers"));
  set(r.smem_static_bytes, number_before(log, " bytes smem"));
  set(r.cmem_bytes, number_before(log, " bytes cmem[0]"));
  set(r.stack_frame_bytes, number_before(log, " bytes stack frame"));
  set(r.spill_store_bytes, number_before(log, " bytes spill stores"));
  set(r.spill_load_bytes, number_before(log, " bytes spill loads"));
  return r;
}

CompileOutput nvrtc_compile(const KernelSpec& spec, const CompileOptions& options, const std::string& arch) {
  check_arch(arch);
  const bool want_ptx = arch.rfind("compute_", 0) == 0;
  auto t0 = std::chrono::steady_clock::now();

  std::vector<const char*> header_texts, header_names;
  for (const auto& s : kernel_sources()) {
    header_texts.push_back(s.text);
    header_names.push_back(s.path);
  }
  std::string source = spec.generated_source();
  std::string name = spec.short_name() + ".cu";
  Program prog;
  check_nvrtc(nvrtcCreateProgram(&prog.p, source.c_str(), name.c_str(), int(header_texts.size()),
                                 header_texts.data(), header_names.data()),
              "nvrtcCreateProgram", spec.name_expression());
  std::string expr = spec.name_expression();
  check_nvrtc(nvrtcAddNameExpression(prog.p, expr.c_str()), "nvrtcAddNameExpression", expr);

  std::vector<std::string> flags = options.flags();
  flags.push_back("-arch=" + arch);
  flags.push_back("-I" + cuda_home() + "/include");
  flags.push_back("-I" + cuda_home() + "/include/cccl");  // CUDA 13 keeps cuda/std here
  if (!want_ptx) flags.push_back("-Xptxas=-v");             // resource usage into the log
  std::vector<const char*> cflags;
  for (auto& f : flags) cflags.push_back(f.c_str());

  nvrtcResult r = nvrtcCompileProgram(prog.p, int(cflags.size()), cflags.data());
  CompileOutput out;
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog.p, &log_size);
  out.log.resize(log_size);
  if (log_size) nvrtcGetProgramLog(prog.p, out.log.data());
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (r != NVRTC_SUCCESS) {
    std::string flat;
    for (auto& f : flags) flat += f + " ";
    throw Error(ErrorKind::kCuda, fmt::format("jit: NVRTC failed to compile {} for {} ({}): {}\n{}", expr, arch,
                                              flat, nvrtcGetErrorString(r), out.log));
  }
  const char* lowered = nullptr;
  check_nvrtc(nvrtcGetLoweredName(prog.p, expr.c_str(), &lowered), "nvrtcGetLoweredName", expr);
  out.lowered_name = lowered;
  size_t size = 0;
  if (want_ptx) {
    check_nvrtc(nvrtcGetPTXSize(prog.p, &size), "nvrtcGetPTXSize", expr);
    out.binary.resize(size);
    check_nvrtc(nvrtcGetPTX(prog.p, out.binary.data()), "nvrtcGetPTX", expr);
  } else {
    check_nvrtc(nvrtcGetCUBINSize(prog.p, &size), "nvrtcGetCUBINSize", expr);
    out.binary.resize(size);
    check_nvrtc(nvrtcGetCUBIN(prog.p, out.binary.data()), "nvrtcGetCUBIN", expr);
    out.resources = parse_ptxas_resources(out.log);
  }
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace tilecraft::jit
