#include "test_util.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "tilecraft/harness/precompile.h"
#include "tilecraft/harness/runner.h"
#include "tilecraft/runtime/device.h"

namespace tilecraft::test {
std::string temp_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path p = fs::path(TILECRAFT_TEST_TMP) / (name + "-" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

namespace {
int run_selected(const harness::Selection& s, DeviceType backend, const std::map<std::string, int>& config) {
  auto m = harness::Manifest::load();
  std::deque<harness::WorkloadSpec> storage;
  auto env = harness::capture_env();
  harness::RunOptions checked;
  checked.checked = true;
  checked.config = config;
  int n = 0;
  const auto cases = harness::select_cases(m, s, storage);
  if (backend == DeviceType::kCUDA) harness::precompile(cases, checked, rt::device_info(0).arch());
  for (auto& c : cases) {
    // One line per case as it starts, so a test stopped by its timeout names
    // the case it was in.
    const std::string what = c.op->name + " / " + c.variant->name + " / " + c.workload->name;
    std::cout << "[" << n + 1 << "/" << cases.size() << "] " << what << std::endl;
    auto r = harness::run_correctness(c, backend, checked, env);
    EXPECT_EQ(r["status"].get<std::string>(), "pass") << what << " (seed " << c.seed << "): " << r.dump();
    ++n;
  }
  return n;
}
}  // namespace

int expect_manifest_cases_pass(const std::string& op, DeviceType backend, const std::string& tag) {
  harness::Selection s;
  s.op = op;
  s.tag = tag;
  return run_selected(s, backend, {});
}

int expect_manifest_cases_pass(const std::string& op, DeviceType backend, const std::string& workload,
                               const std::map<std::string, int>& config, const std::string& variant) {
  harness::Selection s;
  s.op = op;
  s.workload = workload;
  s.variant = variant;
  return run_selected(s, backend, config);
}

PassedRefused expect_config_cases_pass_or_refused(const std::string& op, DeviceType backend,
                                                  const std::vector<std::string>& shapes) {
  harness::Selection s;
  s.op = op;
  s.shapes = shapes;
  auto m = harness::Manifest::load();
  std::deque<harness::WorkloadSpec> storage;
  auto env = harness::capture_env();
  harness::RunOptions checked;
  checked.checked = true;
  const auto cases = harness::select_cases(m, s, storage);
  if (backend == DeviceType::kCUDA) harness::precompile(cases, checked, rt::device_info(0).arch());
  PassedRefused n;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const std::string what = c.op->name + " / " + c.variant->name + " / " + c.workload->name;
    std::cout << "[" << i + 1 << "/" << cases.size() << "] " << what << std::endl;
    const auto r = harness::run_correctness(c, backend, checked, env);
    if (r["status"] == "pass") {
      ++n.passed;
      continue;
    }
    EXPECT_TRUE(r.value("refused", false)) << what << " (seed " << c.seed << "): " << r.dump();
    if (!r.value("refused", false)) continue;
    ++n.refused;
    const std::string msg = r.value("error", std::string());
    bool named = false;
    for (const auto& [key, value] : c.workload->config) {
      std::string base = key;
      for (const char* prefix : {"gate_up_", "down_", "router_"})
        if (base.rfind(prefix, 0) == 0) base = base.substr(std::string(prefix).size());
      named = named || msg.find(base) != std::string::npos;
    }
    EXPECT_TRUE(named) << what << ": the refusal names none of the config's keys: " << msg;
  }
  return n;
}

uint64_t random_shape_seed() {
  const char* s = std::getenv("TILECRAFT_SHAPE_SEED");
  return s && *s ? std::strtoull(s, nullptr, 10) : 20261202ull;
}

int expect_shape_cases_pass(const std::string& op, DeviceType backend, const std::vector<std::string>& shapes,
                            const std::map<std::string, int>& config) {
  harness::Selection s;
  s.op = op;
  s.shapes = shapes;
  return run_selected(s, backend, config);
}
}  // namespace tilecraft::test
