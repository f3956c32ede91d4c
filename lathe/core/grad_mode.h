// Grad mode: a thread-local switch saying whether operations should record gradients. Compiled
// functions guard on it (a trace made with grad enabled is not reused with it disabled).
#pragma once

namespace lathe {

class GradMode {
 public:
  // True unless a NoGradGuard (or set_enabled(false)) is active on this thread.
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Disables grad mode for its scope, restoring the previous state on exit.
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace lathe
