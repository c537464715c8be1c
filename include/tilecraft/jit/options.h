#pragma once
// Compile options: a named set (release / profile / debug) plus the knobs a
// sweep varies. Everything here goes into the cache key through flags().
#include <optional>
#include <string>
#include <vector>

namespace tilecraft::jit {

struct CompileOptions {
  std::string set = "release";       // release | profile (+lineinfo) | debug (-G)
  int max_registers = 0;             // 0: compiler's choice
  std::optional<bool> fast_math;     // unset: the set's default (off)
  std::optional<bool> ftz;
  std::optional<bool> prec_div;
  std::optional<bool> prec_sqrt;
  std::optional<bool> fmad;
  // Per-CTA phase stamps (kernels/tile/trace.cuh; -DTC_TRACE): kernels with
  // stamps record them, jit::take_traces reads them. Off: the same binaries.
  bool trace = false;
  // "" = the process's kernel headers (embedded, or TILECRAFT_KERNEL_DIR's);
  // else the *.cuh read from this directory (text form ",kernels=DIR"): the
  // other side of bench --vs-kernels. Not an NVRTC flag: it keys the caches.
  std::string kernel_dir;

  // Parses "release", "profile", "debug" optionally followed by knobs:
  // "release,maxrregcount=128,fast-math,ftz=1,trace". Throws naming the bad part.
  static CompileOptions parse(const std::string& text);
  // NVRTC flags for these options (no arch, no include paths).
  std::vector<std::string> flags() const;
  std::string str() const;  // canonical text form, parse(str()) == *this
  bool operator==(const CompileOptions&) const = default;
};

}  // namespace tilecraft::jit
