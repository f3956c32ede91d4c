// The thread's autocast state: whether lathe::AutocastGuard (lathe/ops/autocast.h) is active and
// its low-precision dtype. It lives in core because lathe::dispatch reads it before any dispatch
// mode (the tracer records the casts autocast inserts) and lathe/trace guards on it (a trace
// made under autocast is not reused without it).
#pragma once

#include "lathe/core/dtype.h"

namespace lathe::detail {

struct AutocastState {
  bool enabled = false;
  DType dtype = DType::bf16;  // the lower precision: bf16 or f16
  bool operator==(const AutocastState&) const = default;
};

// This thread's state (initially disabled).
AutocastState& autocast_state();

}  // namespace lathe::detail
