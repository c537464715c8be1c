#pragma once
// `--case-timeout S`: a case whose run takes longer than S seconds ends the
// process, naming the case. A kernel that never finishes (a protocol that
// waits for work nobody does) would otherwise hang `tilecraft test` with no
// word of which case, and a CUDA context stuck in such a kernel cannot be
// recovered in-process: the only way on is to report and exit.
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace tilecraft::cli {

class CaseWatchdog {
 public:
  // seconds <= 0: no watchdog. `what` names the case in the message; `gpu`:
  // the case runs on the CUDA backend (else the CPU's, whose model-sized
  // cases can take minutes: the message says so instead of blaming a kernel).
  CaseWatchdog(double seconds, std::string what, bool gpu);
  ~CaseWatchdog();
  CaseWatchdog(const CaseWatchdog&) = delete;
  CaseWatchdog& operator=(const CaseWatchdog&) = delete;

  // The exit status of a process the watchdog ended (a failure found).
  static constexpr int kExitCode = 1;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace tilecraft::cli
