#pragma once
// parallel_for over [0, n) in contiguous chunks on up to hardware_concurrency
// threads (capped at 16); runs inline when the work is small.
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace tilecraft {

template <typename Fn>
void parallel_for(int64_t n, int64_t work_per_item, Fn fn) {
  const int64_t total = n * std::max<int64_t>(work_per_item, 1);
  const int threads =
      total < (int64_t(1) << 20) ? 1 : int(std::max(1u, std::min(16u, std::thread::hardware_concurrency())));
  if (threads == 1 || n < 2) {
    fn(int64_t(0), n);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t per = (n + threads - 1) / threads;
  for (int i = 1; i < threads; ++i) {
    int64_t b = i * per, e = std::min(n, b + per);
    if (b < e) pool.emplace_back(fn, b, e);
  }
  fn(int64_t(0), std::min(n, per));
  for (auto& t : pool) t.join();
}

}  // namespace tilecraft
