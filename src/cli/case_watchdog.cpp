#include "case_watchdog.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace tilecraft::cli {

CaseWatchdog::CaseWatchdog(double seconds, std::string what, bool gpu) {
  if (seconds <= 0) return;
  thread_ = std::thread([this, seconds, gpu, what = std::move(what)] {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) return;
    const std::string msg =
        gpu ? fmt::format("TIMEOUT {}: still running after --case-timeout {:g} s (a kernel that does not finish?); "
                          "exiting: a GPU context stuck in a kernel cannot be recovered in this process\n",
                          what, seconds)
            : fmt::format("TIMEOUT {}: still running on the CPU backend after --case-timeout {:g} s; exiting: a "
                          "running case cannot be stopped in this process (model-sized cases take minutes on the "
                          "CPU: select smaller workloads or raise --case-timeout)\n",
                          what, seconds);
    std::fputs(msg.c_str(), stdout);
    std::fputs(msg.c_str(), stderr);
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(kExitCode);
  });
}

CaseWatchdog::~CaseWatchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace tilecraft::cli
