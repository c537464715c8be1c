#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>

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

CommandResult run_tilecraft(const std::string& args, const std::string& env) {
  const std::string cmd = env + (env.empty() ? "" : " ") + std::string(TILECRAFT_BINARY) + " " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  CommandResult r;
  std::array<char, 4096> buf{};
  while (p && fgets(buf.data(), int(buf.size()), p.get())) r.out += buf.data();
  const int status = p ? pclose(p.release()) : -1;
  r.signaled = status != -1 && WIFSIGNALED(status);
  r.rc = r.signaled ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return r;
}

namespace {
// Every case `s` selects, run on `backend` under `config` (checked mode),
// one line per case as it starts (so a test stopped by its timeout names the
// case it was in); `on_record` takes each case and its record.
void for_each_case(const harness::Selection& s, DeviceType backend, const std::map<std::string, int>& config,
                   const std::function<void(const harness::Case&, const nlohmann::json&)>& on_record) {
  auto m = harness::Manifest::load();
  std::deque<harness::WorkloadSpec> storage;
  auto env = harness::capture_env();
  harness::RunOptions checked;
  checked.checked = true;
  checked.config = config;
  const auto cases = harness::select_cases(m, s, storage);
  if (backend == DeviceType::kCUDA) harness::precompile(cases, checked, rt::device_info(0).arch());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    std::cout << "[" << i + 1 << "/" << cases.size() << "] " << c.op->name << " / " << c.variant->name << " / "
              << c.workload->name << std::endl;
    on_record(c, harness::run_correctness(c, backend, checked, env));
  }
}

std::string what_of(const harness::Case& c) {
  return c.op->name + " / " + c.variant->name + " / " + c.workload->name + " (seed " + std::to_string(c.seed) + ")";
}

int run_selected(const harness::Selection& s, DeviceType backend, const std::map<std::string, int>& config) {
  int n = 0;
  for_each_case(s, backend, config, [&](const harness::Case& c, const nlohmann::json& r) {
    EXPECT_EQ(r["status"].get<std::string>(), "pass") << what_of(c) << ": " << r.dump();
    ++n;
  });
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
  PassedRefused n;
  for_each_case(s, backend, {}, [&](const harness::Case& c, const nlohmann::json& r) {
    if (r["status"] == "pass") {
      ++n.passed;
      return;
    }
    const bool refused = r.value("refused", false);
    EXPECT_TRUE(refused) << what_of(c) << ": " << r.dump();
    if (!refused) return;
    ++n.refused;
    const std::string msg = r.value("error", std::string());
    bool named = false;
    for (const auto& [key, value] : c.workload->config) {
      std::string base = key;
      for (const char* prefix : {"gate_up_", "down_", "router_"})
        if (base.rfind(prefix, 0) == 0) base = base.substr(std::string(prefix).size());
      named = named || msg.find(base) != std::string::npos;
    }
    EXPECT_TRUE(named) << what_of(c) << ": the refusal names none of the config's keys: " << msg;
  });
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
