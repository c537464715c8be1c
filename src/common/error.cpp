#include "tilecraft/error.h"

namespace tilecraft {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid argument";
    case ErrorKind::kType: return "type error";
    case ErrorKind::kNoDevice: return "no CUDA device";
    case ErrorKind::kCuda: return "CUDA error";
    case ErrorKind::kManifest: return "manifest error";
    case ErrorKind::kIndex: return "index error";
    case ErrorKind::kInternal: return "internal error";
  }
  return "error";
}

void throw_arg_error(ErrorKind kind, const std::string& op, const std::string& arg,
                     const std::string& expected, const std::string& given) {
  throw Error(kind, fmt::format("{}: argument '{}': expected {}, got {}", op, arg, expected, given));
}

}  // namespace tilecraft
