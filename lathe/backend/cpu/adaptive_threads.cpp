#include "lathe/backend/cpu/adaptive_threads.h"

#include <algorithm>
#include <iostream>

#include "lathe/backend/cpu/cpu_options.h"

namespace lathe::backend::cpu {

AdaptiveThreads::AdaptiveThreads(std::string name, AdaptivePolicy policy)
    : name_(std::move(name)), policy_(policy) {}

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
}  // namespace

void AdaptiveThreads::start_probe(int threads) {
  probe_.threads = threads;
  probe_.untimed = policy_.warmup_calls;
  probe_.times.clear();
}

int AdaptiveThreads::begin_call(int full) {
  if (full <= 1) return full;
  std::lock_guard<std::mutex> lock(mu_);
  if (full != full_) {  // the first call, or the process's count changed: start over
    full_ = full;
    current_ = full;
    current_untimed_ = policy_.warmup_calls;
    recent_.clear();
    probe_ = Probe{};
    since_check_ = policy_.recheck_every;  // measure one thread as soon as `recent_` is full
  }
  if (probe_.threads == 0 && static_cast<int>(recent_.size()) >= policy_.samples &&
      ++since_check_ >= policy_.recheck_every) {
    since_check_ = 0;
    start_probe(current_ == full_ ? 1 : full_);
  }
  return probe_.threads != 0 ? probe_.threads : current_;
}

void AdaptiveThreads::end_call(int threads, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  if (full_ <= 1) return;
  if (probe_.threads != 0 && threads == probe_.threads) {
    if (probe_.untimed > 0) {
      --probe_.untimed;
      return;
    }
    probe_.times.push_back(seconds);
    if (static_cast<int>(probe_.times.size()) >= policy_.samples) decide();
  } else if (threads == current_) {
    if (current_untimed_ > 0) {
      --current_untimed_;
      return;
    }
    recent_.push_back(seconds);
    if (static_cast<int>(recent_.size()) > policy_.samples) recent_.erase(recent_.begin());
  }
}

// The other count measured: it takes over when its median beats the current count's recent
// median by the margin.
void AdaptiveThreads::decide() {
  const double other = median(probe_.times), now = median(recent_);
  const int measured = probe_.threads;
  probe_.threads = 0;
  if (!(other * policy_.margin < now)) return;
  const int from = current_;
  current_ = measured;
  current_untimed_ = 0;
  recent_ = probe_.times;
  ++switches_;
  if (options().log_threads)
    std::cerr << "[lathe.threads] " << name_ << ": " << from << " -> " << measured
              << " threads (calls took " << now * 1e3 << " ms on " << from << ", " << other * 1e3
              << " ms on " << measured << ")\n";
}

int AdaptiveThreads::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

int AdaptiveThreads::switches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return switches_;
}

}  // namespace lathe::backend::cpu
