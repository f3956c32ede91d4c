// The last stage of the compile path: a captured graph (capture.h) and its training plan (the
// partitioned joint graph, aot_autograd.h) become a cache entry: the captures planned (fresh
// copies of the function's own constants, the ones written in place, module slots read at each
// call), module guards, frozen captures handed to the backend as constants, and the backend's
// compiles of the forward (and backward) graph.
#pragma once

#include <memory>
#include <vector>

#include "lathe/trace/cache_entry.h"
#include "lathe/trace/capture.h"

namespace lathe::detail {

// The entry for `captured` (its guards produced; they move into the entry); aot: the training
// plan or null. module: compile(module)'s, may be null.
std::unique_ptr<CacheEntry> build_entry(CapturedGraph& captured, std::shared_ptr<AotPlan> aot,
                                        nn::Module* module, const CompileOptions& options);

}  // namespace lathe::detail
