#include "lathe/core/dispatch_mode.h"

namespace lathe {
namespace {
// The stack is linked through the guards: each remembers the guard below its own. The top mode
// is kept beside it so that dispatch reads one thread-local.
thread_local DispatchMode* tls_top = nullptr;
thread_local ModeGuard* tls_guard = nullptr;
}  // namespace

DispatchMode* current_dispatch_mode() { return tls_top; }

ModeGuard::ModeGuard(DispatchMode* mode) : mode_(mode), below_(tls_guard) {
  tls_guard = this;
  tls_top = mode;
}

ModeGuard::~ModeGuard() {
  tls_guard = below_;
  tls_top = below_ ? below_->mode_ : nullptr;
}

BelowModeGuard::BelowModeGuard() : popped_(tls_guard) {
  if (!popped_) return;
  tls_guard = popped_->below_;
  tls_top = tls_guard ? tls_guard->mode_ : nullptr;
}

BelowModeGuard::~BelowModeGuard() {
  if (!popped_) return;
  tls_guard = popped_;
  tls_top = popped_->mode_;
}

bool detail::is_tracing() { return tls_top != nullptr && tls_top->is_tracing(); }

}  // namespace lathe
