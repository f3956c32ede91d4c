// The optimizing CPU backend ("cpu"): the pass pipeline (pipeline.h: the list of passes, run by
// the pass manager, lathe/ir/pass_manager.h), then the planned executor (executor.h: a flat
// launch list over a liveness-planned arena) over the rewritten graph; layout tuning
// (layout_tuning.h) times the layout plans on the whole graph when plan_layouts measured its
// choice.
//
// Its switches are CpuBackendOptions (cpu_options.h), read from the environment in one place:
// LATHE_LOGS=passes (or all) prints one line per pass to stderr (with `graph` too, the graph
// after each pass); LATHE_DISABLE_PASSES=fuse_conv,... turns passes off (for bisecting a wrong
// result); LATHE_CPU_EXECUTOR=interpreter runs the result on the interpreter instead of the
// executor.
#pragma once

#include <memory>

#include "lathe/backend/backend.h"
#include "lathe/backend/cpu/cpu_options.h"
#include "lathe/backend/cpu/pipeline.h"

namespace lathe::backend {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace lathe::backend
