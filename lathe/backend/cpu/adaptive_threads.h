// An executable's thread count chosen by what its calls measure. On a busy machine (another
// process on one of the cores) every parallel region, oneDNN's included, waits for the thread
// the OS has descheduled, and a call on all threads can take several times as long as on one.
// AdaptiveThreads times the executable's calls on the process's thread count and on one thread,
// keeps the faster (a switch needs a clear margin: hysteresis), and looks again now and then, so
// a machine that becomes quiet gets its threads back. LATHE_LOGS=threads logs each change.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace lathe::backend::cpu {

struct AdaptivePolicy {
  int warmup_calls = 2;    // calls at a thread count not timed (primitives are created then)
  int samples = 3;         // timed calls per measurement (their median is compared)
  double margin = 1.25;    // the other count must be this much faster to switch
  int recheck_every = 64;  // calls between two measurements of the other count
};

class AdaptiveThreads {
 public:
  explicit AdaptiveThreads(std::string name, AdaptivePolicy policy = {});

  // The thread count for the next call, given the process's count `full` (<= 1: always full).
  int begin_call(int full);
  // The call that begin_call answered `threads` took `seconds`.
  void end_call(int threads, double seconds);

  // The count in use (0 before the first call) and the number of switches so far (tests).
  int current() const;
  int switches() const;

 private:
  struct Probe {
    int threads = 0;
    int untimed = 0;  // warm-up calls left
    std::vector<double> times;
  };
  void start_probe(int threads);
  void decide();

  std::string name_;
  AdaptivePolicy policy_;
  mutable std::mutex mu_;
  int full_ = 0;
  int current_ = 0;
  int current_untimed_ = 0;     // warm-up calls left at the current count
  std::vector<double> recent_;  // the current count's last `samples` call times
  Probe probe_;                 // the measurement of the other count (threads 0: none)
  int since_check_ = 0;
  int switches_ = 0;
};

}  // namespace lathe::backend::cpu
