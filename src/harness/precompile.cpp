#include "tilecraft/harness/precompile.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include "tilecraft/error.h"

namespace tilecraft::harness {

std::vector<CompiledCaseKernel> precompile(const std::vector<Case>& cases, RunOptions o, const std::string& arch,
                                           unsigned threads, std::vector<RefusedCase>* refused) {
  std::vector<CompiledCaseKernel> items;
  std::set<std::string> seen;
  for (auto& c : cases) {
    std::string refused_as;  // the case's last refusal: listed once where both modes refuse it alike
    for (bool checked : {false, true}) {  // tests run checked, benchmarks unchecked
      o.checked = checked;
      std::vector<jit::KernelSpec> specs;
      try {
        specs = adapter_for(c.op->name).kernels(c, with_workload_config(c, o));
      } catch (const Error& e) {
        if (refused && refused_as != e.what()) refused->push_back({c.op->name, c.id(), refused_as = e.what()});
        continue;
      }
      for (auto& k : specs)
        if (seen.insert(k.name_expression()).second) items.push_back({c.op->name, k, nullptr, ""});
    }
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < items.size();) {
      try {
        items[i].kernel = jit::compile(items[i].spec, o.compile, arch);
      } catch (const Error& e) {
        items[i].error = e.what();
      }
    }
  };
  const unsigned n = std::max(1u, std::min<unsigned>(threads ? threads : std::min(16u, std::thread::hardware_concurrency()),
                                                     unsigned(items.size())));
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < n; ++i) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  return items;
}

}  // namespace tilecraft::harness
