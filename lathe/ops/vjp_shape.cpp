// vjp rules of views, copies, cat and reductions; the shared helpers of vjp_util.h.
#include <algorithm>

#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/ops/shape_util.h"
#include "lathe/ops/vjp_util.h"

namespace lathe::detail {

Tensor sum_to(const Tensor& g, const Shape& shape) {
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (size_t i = 0; i < shape.size(); ++i) {
    const SymInt have = g.sizes()[lead + i];
    if (shape[i].maybe_int() == std::optional<int64_t>(1) &&
        have.maybe_int() != std::optional<int64_t>(1))
      dims.push_back(lead + static_cast<int64_t>(i));
  }
  if (dims.empty()) return g;
  return sum(g, dims, true).reshape(shape);
}

Tensor on_device_of(const Tensor& t, const Tensor& ref) {
  if (ref.defined() && ref.device().kind() == DeviceKind::lazy &&
      t.device().kind() != DeviceKind::lazy)
    return t.to(ref.device());
  return t;
}

Tensor size_tensor(SymInt n, DType dt) {
  if (auto v = n.maybe_int()) return full({}, static_cast<double>(*v), dt);
  // An expanded 0-d one summed is exactly n, computed by the graph (one trace for every n).
  return sum(full({}, 1.0, dt).expand({n}));
}

SymInt numel_over(const Tensor& x, const std::vector<int64_t>& dims) {
  SymInt n = 1;
  for (int64_t d : wrap_dims(dims, x.dim(), "vjp")) n = n * x.sizes()[d];
  return n;
}

Tensor expand_reduced(const Tensor& g, const Tensor& x, const Attrs& a) {
  Tensor r = g;
  if (!a.get_bool("keepdim"))
    for (int64_t d : wrap_dims(a.get_ints("dims"), x.dim(), "vjp")) r = r.unsqueeze(d);
  return r.expand(x.sizes());
}

void set_vjp(OpRegistry& r, const char* name, VjpReads reads, VjpRule rule) {
  OpDef& op = r.get_mutable(name);
  op.vjp = std::move(rule);
  op.vjp_reads_outputs = reads.outputs;
  op.vjp_reads_input = [inputs = reads.inputs](int i, const Attrs&) {
    return std::find(inputs.begin(), inputs.end(), i) != inputs.end();
  };
}

namespace {

using G = std::vector<Tensor>;
using Needs = std::vector<bool>;

// The row-major strides of `sizes` (the layout of the zeros a view's gradient is scattered into).
std::vector<int64_t> row_major(const Tensor& x) { return to_ints(contiguous_strides(x.sizes())); }

int64_t sym_attr(const Attrs& a, const char* name) {
  for (const auto& [k, v] : a.items())
    if (std::string(k) == name) {
      if (auto* i = std::get_if<int64_t>(&v)) return *i;
      return std::get<Shape>(v)[0].expect_int();
    }
  throw Error(str("[vjp] missing attribute '", name, "'"));
}

Tensor scatter_into_zeros(const Tensor& g, const Tensor& x, std::vector<int64_t> strides,
                          int64_t offset) {
  Tensor base = on_device_of(zeros(x.sizes(), g.dtype()), g);
  return as_strided_scatter(base, g.contiguous(), g.sizes(), to_shape(strides), offset);
}

}  // namespace

void register_shape_vjps(OpRegistry& r) {
  auto to_input_shape = [](TensorList in, TensorList, TensorList g, const Attrs&, const Needs&) {
    return G{g[0].reshape(in[0].sizes())};
  };
  for (const char* name : {"view", "reshape", "squeeze", "unsqueeze"})
    set_vjp(r, name, {}, to_input_shape);
  set_vjp(r, "permute", {},
          [](TensorList in, TensorList, TensorList g, const Attrs& a, const Needs&) {
            auto dims = a.get_ints("dims");
            std::vector<int64_t> inv(dims.size());
            for (size_t i = 0; i < dims.size(); ++i)
              inv[wrap_dim(dims[i], in[0].dim(), "permute")] = static_cast<int64_t>(i);
            return G{g[0].permute(inv)};
          });
  set_vjp(r, "expand", {}, [](TensorList in, TensorList, TensorList g, const Attrs&, const Needs&) {
    return G{sum_to(g[0], in[0].sizes())};
  });
  set_vjp(r, "slice", {},
          [](TensorList in, TensorList, TensorList g, const Attrs& a, const Needs&) {
            const Tensor& x = in[0];
            const int64_t d = wrap_dim(a.get_int("dim"), x.dim(), "slice");
            const int64_t n = x.sizes()[d].expect_int();
            int64_t start = sym_attr(a, "start");
            if (start < 0) start += n;
            start = std::clamp<int64_t>(start, 0, n);
            auto st = row_major(x);
            const int64_t offset = start * st[d];
            st[d] *= a.get_int("step");
            return G{scatter_into_zeros(g[0], x, st, offset)};
          });
  set_vjp(r, "select", {},
          [](TensorList in, TensorList, TensorList g, const Attrs& a, const Needs&) {
            const Tensor& x = in[0];
            const int64_t d = wrap_dim(a.get_int("dim"), x.dim(), "select");
            int64_t index = a.get_int("index");
            if (index < 0) index += x.sizes()[d].expect_int();
            auto st = row_major(x);
            const int64_t offset = index * st[d];
            st.erase(st.begin() + d);
            return G{scatter_into_zeros(g[0], x, st, offset)};
          });
  set_vjp(r, "clone", {}, [](TensorList in, TensorList, TensorList g, const Attrs&, const Needs&) {
    return G{g[0].to(in[0].dtype())};
  });
  set_vjp(r, "cat", {},
          [](TensorList in, TensorList, TensorList g, const Attrs& a, const Needs& n) {
            G out(in.size());
            const int64_t d = wrap_dim(a.get_int("dim"), g[0].dim(), "cat");
            SymInt offset = 0;
            for (size_t i = 0; i < in.size(); ++i) {
              if (!in[i].defined()) continue;
              if (n[i]) out[i] = g[0].narrow(d, offset, in[i].sizes()[d]);
              offset = offset + in[i].sizes()[d];
            }
            return out;
          });

  // ---- reductions ----
  set_vjp(r, "sum", {}, [](TensorList in, TensorList, TensorList g, const Attrs& a, const Needs&) {
    return G{expand_reduced(g[0], in[0], a)};
  });
  set_vjp(r, "mean", {}, [](TensorList in, TensorList, TensorList g, const Attrs& a, const Needs&) {
    const Tensor& x = in[0];
    return G{div(expand_reduced(g[0], x, a),
                 size_tensor(numel_over(x, a.get_ints("dims")), g[0].dtype()))};
  });
  // Ties share the gradient evenly (as torch.amax; torch.max(dim) picks one index instead).
  auto extreme = [](TensorList in, TensorList out, TensorList g, const Attrs& a, const Needs&) {
    const Tensor& x = in[0];
    Tensor hit = eq(x, expand_reduced(out[0], x, a)).to(x.dtype());
    Tensor count = sum(hit, a.get_ints("dims"), true);
    return G{div(mul(expand_reduced(g[0], x, a), hit), count)};
  };
  for (const char* name : {"amax", "amin", "max", "min"}) set_vjp(r, name, {{0}, true}, extreme);
  set_vjp(
      r, "var", {{0}}, [](TensorList in, TensorList, TensorList g, const Attrs& a, const Needs&) {
        const Tensor& x = in[0];
        auto dims = a.get_ints("dims");
        const int64_t corr = a.has("correction") ? a.get_int("correction") : 0;
        Tensor denom = sub(size_tensor(numel_over(x, dims), x.dtype()), static_cast<double>(corr));
        Tensor centered = sub(x, mean(x, dims, true));
        return G{mul(expand_reduced(g[0], x, a), div(mul(centered, 2.0), denom))};
      });
  set_vjp(r, "std", {{0}, true},
          [](TensorList in, TensorList out, TensorList g, const Attrs& a, const Needs&) {
            const Tensor& x = in[0];
            auto dims = a.get_ints("dims");
            const int64_t corr = a.has("correction") ? a.get_int("correction") : 0;
            Tensor denom =
                sub(size_tensor(numel_over(x, dims), x.dtype()), static_cast<double>(corr));
            Tensor centered = sub(x, mean(x, dims, true));
            return G{div(mul(expand_reduced(g[0], x, a), centered),
                         mul(expand_reduced(out[0], x, a), denom))};
          });
}

}  // namespace lathe::detail
