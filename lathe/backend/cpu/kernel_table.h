// The cpu backend's kernel table: what it knows about running each op, keyed by the op.
//
// lathe/ops says what an op is; this table says how the cpu backend lowers it: the kernel that
// writes into preplanned outputs (arena planning), the oneDNN post-op form a fused conv / linear
// absorbs, the instruction of a fused pointwise program, and the input whose buffer the kernel
// may write over. Filled once on first use (kernel_table.cpp and the registration functions it
// calls); read without locks after that.
#pragma once

#include <functional>
#include <optional>

#include "lathe/backend/kernel_table.h"
#include "lathe/kernels/pointwise_program.h"
#include "lathe/ops/op_def.h"

namespace lathe::backend::cpu {

struct CpuKernelInfo {
  // The kernel writing into given outputs (see OutKernel); unset for ops that only allocate.
  OutKernel out_kernel = nullptr;
  // For ops a fused conv / matmul can absorb as a post-op: the activation for these
  // attributes, or nullopt when these attributes have no post-op form. Unset: never absorbed.
  std::function<std::optional<PostOp>(const Attrs&)> post_op = nullptr;
  // For a pointwise op a fused f32 program can compute (fuse_pointwise): the instruction for
  // these attributes, operands left for the pass to fill (input 0 -> a, input 1 -> b); nullopt
  // when these attributes have no such form. Unset: never fused.
  std::function<std::optional<kernels::PwInstr>(const Attrs&)> pointwise_instr = nullptr;
  // An input whose buffer out_kernel may be handed as its output when that input dies at the
  // op (same sizes, strides and dtype): the residual of a fused conv / linear, which the kernel
  // accumulates into; a row kernel's input. -1: none (pointwise ops may overwrite any input; the
  // planner knows).
  int in_place_input = -1;
};

using CpuKernelTable = KernelTable<CpuKernelInfo>;

// The table, filled on first use.
const CpuKernelTable& cpu_kernels();
// The entry of op, or null when the cpu backend has none (it then runs the eager kernel).
inline const CpuKernelInfo* cpu_kernel(const OpDef* op) { return cpu_kernels().find(op); }

// Registration functions kernel_table.cpp calls once (kernel_table_pointwise.cpp).
void register_post_ops(CpuKernelTable& t);
void register_pointwise_instrs(CpuKernelTable& t);

}  // namespace lathe::backend::cpu
