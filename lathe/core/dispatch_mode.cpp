#include "lathe/core/dispatch_mode.h"

namespace lathe {
namespace {
// The stack is linked through the guards: each remembers the mode below its own.
thread_local DispatchMode* tls_top = nullptr;
}  // namespace

DispatchMode* current_dispatch_mode() { return tls_top; }

ModeGuard::ModeGuard(DispatchMode* mode) : prev_(tls_top) { tls_top = mode; }

ModeGuard::~ModeGuard() { tls_top = prev_; }

bool detail::is_tracing() { return tls_top != nullptr && tls_top->is_tracing(); }

}  // namespace lathe
