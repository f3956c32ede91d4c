// CompileOptions: every switch of lathe::compile in one typed struct. The environment switches
// (LATHE_LOGS, LATHE_COMPILE_VERIFY) are read once, by compile_options_from_env, into the process
// default; code sets it with set_default_compile_options (Python: lathe.set_compile_options) or
// passes options per call (lathe::compile's second argument, which defaults to it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lathe/core/dtype.h"

namespace lathe {

class Partitioner;  // lathe/trace/partition.h

// How the sizes of tensor arguments become symbols when tracing.
enum class DynamicPolicy : uint8_t {
  kStatic,  // every size is a constant; a new size recompiles
  kAuto,    // static first; a dim whose size changed is recompiled as dynamic (the default)
  kDynamic  // every size of 2 or more is a symbol from the first trace
};

struct CompileOptions {
  // A lathe::backend registry name: "cpu" (the default: the optimizing pass pipeline and the
  // planned executor, see docs/architecture.md) or "interpreter" (the reference: runs the traced
  // graph node by node with the eager kernels).
  std::string backend = "cpu";
  DynamicPolicy dynamic = DynamicPolicy::kAuto;
  // At most this many cache entries; a miss beyond it runs the function eagerly (with one
  // warning naming the failing guard) or throws when error_on_recompile_limit is set.
  int recompile_limit = 8;
  bool error_on_recompile_limit = false;
  std::string name = "fn";  // how logs and errors name the function
  // Freezing (for backends that use constants, such as "cpu"), for inference calls (grad mode
  // off, or every module the function read in eval mode): captured parameters and buffers that
  // the graph does not write, on the CPU or the lazy device (its buffer), and not requiring grad
  // (or traced with grad disabled) are handed to the backend as constants, which may fold them
  // (batch norm into the conv weights, ...). The entry is guarded by their storage versions: an
  // in-place update (or a new tensor in the slot) drops the entry and the next call re-freezes.
  bool freeze = true;
  // The compute precision of inference entries: f32 (the default) or bf16 (LATHE_PRECISION=bf16):
  // the backend may then run convolutions and linear layers on bf16 kernels (operands rounded to
  // bf16, f32 accumulation; the cpu backend's lower_precision pass: inputs, outputs and every
  // other op stay f32, frozen weights are converted once). Where the CPU has no bf16 kernels it
  // computes in f32 (one log line with LATHE_LOGS=passes). Training entries compute in f32.
  DType precision = DType::f32;
  // Verification (a debugging aid for stale results): for the first `verify_calls` calls served
  // by each cache entry, the function also runs eagerly on the same inputs (arguments and the
  // tensors the graph writes are restored in between, so state is updated once) and the call
  // throws lathe::Error naming the function and the first output (or written tensor) where
  // |compiled - eager| > verify_atol + verify_rtol * |eager|. The process default's verify (from
  // LATHE_COMPILE_VERIFY=1, or =N for N calls per entry) applies to a function whose own options
  // leave it off.
  bool verify = false;
  int verify_calls = 10;
  double verify_rtol = 1e-4;
  double verify_atol = 1e-5;
  // Graph breaks: code that reads tensor data while traced (item(), to_vector(), printing values,
  // a branch on a value) makes the function run as regions split at each read (lathe/trace/
  // regions.h, docs/trace.md). fullgraph = true makes such a read an error instead (one graph or
  // nothing, as torch.compile(fullgraph=True)).
  bool fullgraph = false;
  // Log topics, as LATHE_LOGS: a comma list of "recompiles", "guards", "graph", "passes",
  // "threads", "graph_breaks" (or "all"). A function logs the process default's topics
  // (set_compile_logs) and its own.
  std::string logs;
  // How the joint graph of a training entry splits into forward and backward (null: the
  // default rule, DefaultPartitioner in lathe/trace/partition.h).
  std::shared_ptr<const Partitioner> partitioner;

  // One line: every field as name=value ("partitioner=default" when null).
  std::string to_string() const;
};

// The options the environment asks for (LATHE_LOGS, LATHE_COMPILE_VERIFY, LATHE_PRECISION), the
// rest default:
// the one place in lathe/trace that reads LATHE_* variables. Reads the environment each call;
// the process default reads it once. Throws lathe::Error for a malformed LATHE_COMPILE_VERIFY;
// an unknown LATHE_LOGS topic is warned about and the variable ignored.
CompileOptions compile_options_from_env();

// The process default: compile_options_from_env() at first use (then, when LATHE_LOGS is set,
// its to_string() is logged once), or what set_default_compile_options stored since.
CompileOptions default_compile_options();
// Replaces the process default (its `logs` become the process's log topics); throws
// lathe::Error for an unknown log topic. Functions compiled before keep their options.
void set_default_compile_options(CompileOptions options);

}  // namespace lathe
