#pragma once
// The environment every report carries: device, driver, compilers, build, commit.
#include <nlohmann/json.hpp>
#include <string>

namespace tilecraft::harness {

struct EnvInfo {
  bool has_gpu = false;
  std::string no_gpu_reason;
  nlohmann::json j;  // all fields, flat
  std::string device_label() const;  // "NVIDIA H200 (sm_90a)" or "cpu (no CUDA device)"
};

EnvInfo capture_env(int device = 0);
std::string git_commit();  // $TILECRAFT_GIT_COMMIT, else git in the source tree, else "unknown"
std::string now_iso8601();

}  // namespace tilecraft::harness
