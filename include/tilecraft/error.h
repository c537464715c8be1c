#pragma once
// Errors: one exception type with a category, so the CLI can map categories to
// exit codes and the Python layer to exception classes, and every message
// names the op, the argument, what was expected and what was given.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace tilecraft {

enum class ErrorKind {
  kInvalidArgument,  // bad shape, value, flag
  kType,             // bad dtype
  kNoDevice,         // a GPU path was asked for and none is usable
  kCuda,             // a driver / NVRTC / cuBLAS call failed
  kManifest,         // manifest file is malformed
  kIndex,            // checked mode found index values out of range
  kInternal,
};

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// "<op>: argument '<arg>': expected <expected>, got <given>"
[[noreturn]] void throw_arg_error(ErrorKind kind, const std::string& op, const std::string& arg,
                                  const std::string& expected, const std::string& given);

}  // namespace tilecraft

// Checks an argument; on failure throws with the four parts of a useful message.
#define TC_CHECK_ARG(cond, op, arg, expected, given)                                       \
  do {                                                                                     \
    if (!(cond)) ::tilecraft::throw_arg_error(::tilecraft::ErrorKind::kInvalidArgument, (op), \
                                              (arg), (expected), (given));                  \
  } while (0)
