#include "lathe/backend/cpu/kernel_table.h"

namespace lathe::backend::cpu {
namespace {

// Inputs a kernel may write its output over (CpuKernelInfo::in_place_input).
void register_in_place_inputs(CpuKernelTable& t) {
  const OpRegistry& r = OpRegistry::global();
  // Each row is read (its maximum, or its moments, then each element before the same element is
  // written) by one thread: the row kernel may write over its input.
  for (const char* name : {"softmax", "log_softmax", "layer_norm"})
    t.entry(r.get(name)).in_place_input = 0;
  // The residual a fused conv / linear accumulates into (its sum post-op).
  t.entry(r.get("conv2d_fused")).in_place_input = 7;  // x w b mean var gamma beta residual
  t.entry(r.get("linear_fused")).in_place_input = 3;  // x w b residual
  t.entry(r.get("conv2d_blocked")).in_place_input = 3;  // x w b residual
  // Each tile reads its inputs before writing the same elements.
  t.entry(r.get("pointwise_fused")).in_place_input = 0;
}

CpuKernelTable* build_table() {
  auto* t = new CpuKernelTable();
  const OpRegistry& r = OpRegistry::global();
  for (const auto& [op, kernel] : r.out_kernels()) t->entry(*op).out_kernel = kernel;
  register_in_place_inputs(*t);
  register_post_ops(*t);
  register_pointwise_instrs(*t);
  return t;
}

}  // namespace

const CpuKernelTable& cpu_kernels() {
  static const CpuKernelTable* table = build_table();
  return *table;
}

}  // namespace lathe::backend::cpu
