// Errors raised while tracing, made readable for the user: symbols printed with the sizes of the
// call being traced ("f32[s0=20]") and, when sizes were symbolic, what to change.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/core/error.h"
#include "lathe/trace/compile.h"

namespace lathe::detail {

// A size symbol of a trace and its value in the call being traced.
struct TracedSize {
  std::string name;    // "s0"
  int64_t value = 0;   // 20
  std::string source;  // "arg0.size(1)"
};

// The symbols of the fake arguments `fakes`, with the sizes of the real arguments `args`.
std::vector<TracedSize> traced_sizes(const std::vector<Arg>& args, const std::vector<Arg>& fakes);

// `message` with each symbol that stands alone printed with its value ("f32[s0=20]"), and the
// values of symbols inside expressions listed at the end ("(s0=20)").
std::string with_traced_sizes(const std::string& message, const std::vector<TracedSize>& sizes);

// Throws an error of e's type (lathe::Error or a sym:: error) whose message has the sizes and,
// when it mentions a symbol, says how to trace those sizes as constants instead.
[[noreturn]] void rethrow_traced_error(const Error& e, const std::vector<TracedSize>& sizes,
                                       const CompileOptions& options);

}  // namespace lathe::detail
