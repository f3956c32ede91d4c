#include "lathe/core/autocast_state.h"

namespace lathe::detail {

AutocastState& autocast_state() {
  static thread_local AutocastState state;
  return state;
}

}  // namespace lathe::detail
