// The post-op and fused-program forms of the pointwise ops (CpuKernelInfo::post_op and
// ::pointwise_instr).
#include <limits>

#include "lathe/backend/cpu/kernel_table.h"

namespace lathe::backend::cpu {

void register_post_ops(CpuKernelTable& t) {
  const OpRegistry& r = OpRegistry::global();
  using A = const Attrs&;
  t.entry(r.get("relu")).post_op = [](A) {
    return std::optional<PostOp>(PostOp{PostOp::Kind::relu});
  };
  t.entry(r.get("hardtanh")).post_op = [](A a) {
    return std::optional<PostOp>(
        PostOp{PostOp::Kind::clip, a.get_double("min_val"), a.get_double("max_val")});
  };
  t.entry(r.get("gelu")).post_op = [](A a) {
    return std::optional<PostOp>(PostOp{a.get_string("approximate") == "tanh"
                                            ? PostOp::Kind::gelu_tanh
                                            : PostOp::Kind::gelu_erf});
  };
}

void register_pointwise_instrs(CpuKernelTable& t) {
  using kernels::PwInstr;
  using kernels::PwOp;
  using Fact = std::function<std::optional<PwInstr>(const Attrs&)>;
  const OpRegistry& r = OpRegistry::global();
  auto plain = [](PwOp op) -> Fact { return [op](const Attrs&) { return PwInstr{op}; }; };
  auto with_alpha = [](PwOp op) -> Fact {
    return [op](const Attrs& a) {
      PwInstr in{op};
      in.c0 = a.has("alpha") ? a.get_double("alpha") : 1.0;
      return in;
    };
  };
  auto set = [&](const char* name, Fact f) { t.entry(r.get(name)).pointwise_instr = std::move(f); };
  set("add", with_alpha(PwOp::add));
  set("sub", with_alpha(PwOp::sub));
  for (auto [name, op] : {std::pair{"mul", PwOp::mul},
                          {"div", PwOp::div},
                          {"maximum", PwOp::maximum},
                          {"minimum", PwOp::minimum},
                          {"neg", PwOp::neg},
                          {"relu", PwOp::relu},
                          {"sigmoid", PwOp::sigmoid},
                          {"tanh", PwOp::tanh},
                          {"exp", PwOp::exp},
                          {"hardswish", PwOp::hardswish},
                          {"hardsigmoid", PwOp::hardsigmoid}})
    set(name, plain(op));
  set("gelu", [](const Attrs& a) {
    return PwInstr{a.get_string("approximate") == "tanh" ? PwOp::gelu_tanh : PwOp::gelu_erf};
  });
  set("clamp", [](const Attrs& a) {
    PwInstr in{PwOp::clamp};
    in.c0 = a.has("min") ? a.get_double("min") : -std::numeric_limits<double>::infinity();
    in.c1 = a.has("max") ? a.get_double("max") : std::numeric_limits<double>::infinity();
    return in;
  });
  set("hardtanh", [](const Attrs& a) {
    PwInstr in{PwOp::clamp};
    in.c0 = a.get_double("min_val");
    in.c1 = a.get_double("max_val");
    return in;
  });
  set("mul_scalar", [](const Attrs& a) {
    PwInstr in{PwOp::scale};
    in.c0 = a.get_double("other");
    return in;
  });
}

}  // namespace lathe::backend::cpu
