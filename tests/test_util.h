#pragma once
// Shared helpers for the test suites.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tilecraft/error.h"
#include "tilecraft/runtime/driver.h"
#include "tilecraft/tensor.h"

// GPU tests skip, saying why, on machines without a usable CUDA device.
#define TC_REQUIRE_GPU()                                                                     \
  do {                                                                                       \
    if (!::tilecraft::rt::driver_available())                                                \
      GTEST_SKIP() << "no CUDA device: " << ::tilecraft::rt::driver_unavailable_reason();    \
  } while (0)

// Expects `stmt` to throw tilecraft::Error of `kind` whose message contains each of `parts`.
#define TC_EXPECT_ERROR(stmt, want_kind, ...)                                                     \
  do {                                                                                       \
    try {                                                                                    \
      stmt;                                                                                  \
      ADD_FAILURE() << "expected an error from: " #stmt;                                     \
    } catch (const ::tilecraft::Error& e) {                                                  \
      EXPECT_EQ(int(e.kind()), int(want_kind)) << e.what();                                     \
      for (const char* part : {__VA_ARGS__})                                                 \
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos)                      \
            << "message lacks '" << part << "': " << e.what();                               \
    }                                                                                        \
  } while (0)

namespace tilecraft::test {
std::string temp_dir(const std::string& name);  // fresh, under the build tree
// The tilecraft binary of this build run with `args` (a shell command line's
// tail; `env`: assignments before it), stdout and stderr together.
struct CommandResult {
  int rc = -1;          // the exit status (128 + N where the shell saw signal N)
  bool signaled = false;  // ended by a signal (a crash, not an exit)
  std::string out;
};
CommandResult run_tilecraft(const std::string& args, const std::string& env = "");
// Runs every case of `op` selected by `tag` ("" = its default tags) on
// `backend` through the harness and expects each to pass; returns the count.
int expect_manifest_cases_pass(const std::string& op, DeviceType backend, const std::string& tag = "");
// The same for one workload (and variant: empty = all) under kernel config
// overrides (--config).
int expect_manifest_cases_pass(const std::string& op, DeviceType backend, const std::string& workload,
                               const std::map<std::string, int>& config, const std::string& variant = "");
// The seed of the random-shape tests (harness/random_shapes.h):
// TILECRAFT_SHAPE_SEED, else 20261202 (to explore more shapes: every failure
// prints its shape string).
uint64_t random_shape_seed();
// The same over ad-hoc workloads (--shape strings; every variant of each).
int expect_shape_cases_pass(const std::string& op, DeviceType backend, const std::vector<std::string>& shapes,
                            const std::map<std::string, int>& config = {});
// Workloads that pin config overrides (harness::with_random_configs): each
// case must pass, or be refused by an error that names one of its
// workload's config keys (without a gate_up_ / down_ / router_ prefix);
// returns how many passed and how many were refused.
struct PassedRefused {
  int passed = 0, refused = 0;
};
PassedRefused expect_config_cases_pass_or_refused(const std::string& op, DeviceType backend,
                                                  const std::vector<std::string>& shapes);
}
