#include "lathe/backend/cpu/op_handles.h"

namespace lathe::backend::cpu {

const CpuOps& cpu_ops() {
  static const CpuOps ops = [] {
    const OpRegistry& r = OpRegistry::global();
    auto op = [&](const char* name) { return &r.get(name); };
    CpuOps o{};
    o.add = op("add");
    o.mul = op("mul");
    o.div = op("div");
    o.softmax = op("softmax");
    o.matmul = op("matmul");
    o.permute = op("permute");
    o.slice = op("slice");
    o.cat = op("cat");
    o.batch_norm = op("batch_norm");
    o.conv2d = op("conv2d");
    o.linear = op("linear");
    o.max_pool2d = op("max_pool2d");
    o.conv2d_fused = op("conv2d_fused");
    o.linear_fused = op("linear_fused");
    o.conv2d_blocked = op("conv2d_blocked");
    o.conv2d_1x1_dw_blocked = op("conv2d_1x1_dw_blocked");
    o.to_blocked = op("to_blocked");
    o.from_blocked = op("from_blocked");
    o.max_pool2d_blocked = op("max_pool2d_blocked");
    o.pointwise_fused = op("pointwise_fused");
    o.sdpa_fused = op("sdpa_fused");
    return o;
  }();
  return ops;
}

}  // namespace lathe::backend::cpu
