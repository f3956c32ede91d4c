// Verification mode (CompileOptions::verify, LATHE_COMPILE_VERIFY): a compiled call and the eager
// function run on the same inputs and their results are compared, to find stale results (state
// the guards cannot see, such as host values captured by a lambda).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lathe/trace/compile.h"

namespace lathe::detail {

// How many calls of each cache entry to verify: options.verify_calls when options.verify is set,
// else the process default's (LATHE_COMPILE_VERIFY; 0 when it is off).
int verify_call_count(const CompileOptions& options);

// Runs `eager`, then restores those of `written` (the tensors the call may write in place) that
// it changed and the default random generator to their state before the call and runs
// `compiled`. Throws lathe::Error naming the function (options.name), `call` and the first output
// or written tensor whose values differ beyond the options' tolerance. The state afterwards is
// the compiled call's (a training call's autograd node saved tensors nothing writes after it),
// or on a difference the eager run's.
// Returns the compiled outputs.
std::vector<Tensor> verified_call(const CompileOptions& options, const std::string& call,
                                  const std::vector<std::pair<std::string, Tensor>>& written,
                                  const std::function<std::vector<Tensor>()>& compiled,
                                  const std::function<std::vector<Tensor>()>& eager);

}  // namespace lathe::detail
