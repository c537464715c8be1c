#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

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

void check_arch(const std::string& arch, const std::string& op, const std::string& arg) {
  // (sm|compute)_ then 2-3 digits then an optional 'a' or 'f'.
  size_t i = arch.rfind("sm_", 0) == 0 ? 3 : arch.rfind("compute_", 0) == 0 ? 8 : std::string::npos;
  size_t digits = 0;
  if (i != std::string::npos)
    while (i + digits < arch.size() && is_digit(arch[i + digits])) ++digits;
  const size_t rest = i == std::string::npos ? 0 : arch.size() - i - digits;
  const bool ok = i != std::string::npos && digits >= 2 && digits <= 3 &&
                  (rest == 0 || (rest == 1 && (arch.back() == 'a' || arch.back() == 'f')));
  if (!ok)
    throw_arg_error(ErrorKind::kInvalidArgument, op, arg, "sm_XY[a] or compute_XY[a], e.g. sm_90a",
                    "'" + arch + "'");
  // A well-formed number this NVRTC does not compile for (sm_12a for
  // sm_120a) is the user's typo, not a compiler failure.
  // (Asked once: every compile checks its arch.)
  static const std::vector<int> archs = [] {
    int n = 0;
    std::vector<int> v;
    if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
      v.assign(size_t(n), 0);
      if (nvrtcGetSupportedArchs(v.data()) != NVRTC_SUCCESS) v.clear();
    }
    return v;
  }();
  if (archs.empty()) return;  // cannot tell: NVRTC will say
  const int cc = std::stoi(arch.substr(i, digits));
  if (std::find(archs.begin(), archs.end(), cc) != archs.end()) return;
  std::string list;
  for (int a : archs) list += (list.empty() ? "" : ", ") + std::to_string(a);
  throw_arg_error(ErrorKind::kInvalidArgument, op, arg,
                  fmt::format("a compute capability NVRTC {} compiles for ({}), e.g. sm_90a", nvrtc_version(), list),
                  "'" + arch + "'");
}

int arch_cc_major(const std::string& arch) {
  check_arch(arch);
  const size_t i = arch.find('_') + 1;
  size_t digits = 0;
  while (i + digits < arch.size() && is_digit(arch[i + digits])) ++digits;
  return std::stoi(arch.substr(i, digits - 1));  // all but the minor digit
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

namespace {
// Little-endian field of `bytes` bytes at `at`; false past the end.
bool read_le(const std::string& b, uint64_t at, int bytes, uint64_t& v) {
  if (at > b.size() || b.size() - at < uint64_t(bytes)) return false;
  v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | uint8_t(b[at + i]);
  return true;
}
}  // namespace

int cubin_function_bytes(const std::string& cubin, const std::string& function) {
  // ELF64 header: magic, class 2 (64-bit), section headers at e_shoff
  // (0x28), e_shentsize (0x3a), e_shnum (0x3c), names in e_shstrndx (0x3e).
  if (cubin.size() < 0x40 || cubin.compare(0, 4, "\x7f" "ELF") != 0 || cubin[4] != 2) return 0;
  uint64_t shoff, entsize, count, names_index;
  if (!read_le(cubin, 0x28, 8, shoff) || !read_le(cubin, 0x3a, 2, entsize) || !read_le(cubin, 0x3c, 2, count) ||
      !read_le(cubin, 0x3e, 2, names_index) || entsize < 0x28 || names_index >= count)
    return 0;
  // Section header: sh_name (0x00, 4 bytes), sh_offset (0x18, 8), sh_size (0x20, 8).
  auto field = [&](uint64_t section, uint64_t at, int bytes, uint64_t& v) {
    return read_le(cubin, shoff + section * entsize + at, bytes, v);
  };
  uint64_t names_at, names_size;
  if (!field(names_index, 0x18, 8, names_at) || !field(names_index, 0x20, 8, names_size) ||
      names_at > cubin.size() || cubin.size() - names_at < names_size)
    return 0;
  const std::string want = ".text." + function;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t name, size;
    if (!field(i, 0x00, 4, name) || !field(i, 0x20, 8, size)) return 0;
    if (name >= names_size) continue;
    const char* at = cubin.data() + names_at + name;
    const size_t room = names_size - name;
    if (strnlen(at, room) == want.size() && want.compare(0, want.size(), at, want.size()) == 0)
      return size <= uint64_t(INT32_MAX) ? int(size) : 0;
  }
  return 0;
}

CompileOutput nvrtc_compile(const KernelSpec& spec, const CompileOptions& options, const std::string& arch) {
  check_arch(arch);
  const bool want_ptx = arch.rfind("compute_", 0) == 0;
  auto t0 = std::chrono::steady_clock::now();

  std::vector<const char*> header_texts, header_names;
  for (const auto& s : kernel_sources(options.kernel_dir)) {
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
    out.resources.code_bytes = cubin_function_bytes(out.binary, out.lowered_name);
  }
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace tilecraft::jit
