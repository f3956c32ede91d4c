#include "lathe/backend/cpu/lower_precision.h"

#include <iostream>
#include <mutex>

#include "lathe/backend/cpu/op_handles.h"
#include "lathe/backend/cpu/rewrite.h"
#include "lathe/kernels/dnnl_common.h"

namespace lathe::backend::cpu {
namespace {

bool is_f32(const ir::Value* v) { return v && v->type().dtype == DType::f32; }

// A depthwise convolution: one input channel per group, several groups. conv2d_blocked's input is
// [N, C/B, H, W, B] (or a plain first convolution); its weight [O, C/groups, KH, KW] says it.
bool depthwise(const ir::Node& n) {
  const int64_t groups = n.attrs().get_int("groups");
  const std::optional<int64_t> per_group = n.inputs()[1]->type().sizes[1].maybe_int();
  return groups > 1 && per_group == 1;
}

}  // namespace

std::unique_ptr<ir::Graph> lower_precision(const ir::Graph& g, DType precision,
                                           LowerPrecisionStats* stats) {
  LATHE_CHECK(precision == DType::f32 || precision == DType::bf16,
              "[lower_precision] the compute precision is f32 or bf16, got ",
              dtype_name(precision));
  LowerPrecisionStats s;
  const bool on = precision == DType::bf16 && lathe::detail::dnnl_bf16_native();
  s.unsupported = precision == DType::bf16 && !on;
  if (s.unsupported) {
    static std::once_flag once;
    std::call_once(once, [] {
      std::cerr << "[lathe] warning: precision bf16 asked, but this CPU has neither avx512_bf16 "
                   "nor AMX (or ONEDNN_MAX_CPU_ISA excludes them): convolutions and linear "
                   "layers compute in f32\n";
    });
  }
  const CpuOps& ops = cpu_ops();
  auto out = rewrite_graph(g, [&](const ir::Node& n, GraphCopy& copy) {
    if (!on) return false;
    const OpDef* op = &n.op();
    const bool conv = op == ops.conv2d || op == ops.conv2d_fused || op == ops.conv2d_blocked;
    const bool linear = op == ops.linear || op == ops.linear_fused;
    if (!(conv || linear) || !is_f32(n.inputs()[0]) || !is_f32(n.inputs()[1])) return false;
    if (n.attrs().has("precision")) return false;  // chosen already
    if (conv && depthwise(n)) {
      ++s.depthwise_kept;
      return false;
    }
    Attrs attrs = n.attrs();
    attrs.set("precision", std::string("bf16"));
    std::vector<ir::Value*> inputs;
    for (const ir::Value* v : n.inputs()) inputs.push_back(copy[v]);
    std::vector<ir::ValueType> types;
    for (const ir::Value* v : n.outputs()) types.push_back(v->type());
    ir::Node* m =
        copy.graph->add_node(n.op(), std::move(inputs), std::move(attrs), std::move(types));
    for (size_t i = 0; i < n.outputs().size(); ++i) copy.map[n.output(i)] = m->output(i);
    (conv ? s.convs : s.linears) += 1;
    return true;
  });
  if (stats) *stats = s;
  return out;
}

}  // namespace lathe::backend::cpu
