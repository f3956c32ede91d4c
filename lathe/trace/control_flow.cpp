#include "lathe/trace/control_flow.h"

#include "lathe/core/dispatch_mode.h"
#include "lathe/ops/ops.h"

namespace lathe {

namespace {

// The writes the tracing mode has recorded so far, or -1 when it cannot tell.
int64_t recorded_writes() {
  DispatchMode* mode = current_dispatch_mode();
  return mode ? mode->recorded_writes() : -1;
}

std::vector<Tensor> run_branch(const Branch& fn, const std::vector<Tensor>& args,
                               const char* which) {
  const int64_t before = recorded_writes();
  std::vector<Tensor> outs = fn(args);
  const int64_t after = recorded_writes();
  LATHE_CHECK(before < 0 || after == before, "[cond] ", which,
              " writes a tensor in place while traced; both branches are recorded, so the write "
              "would happen whichever branch is taken: return the new value instead");
  return outs;
}

}  // namespace

std::vector<Tensor> cond(const Tensor& pred, const Branch& then_fn, const Branch& else_fn,
                         const std::vector<Tensor>& args) {
  LATHE_CHECK(pred.defined() && pred.numel() == 1,
              "[cond] pred must be a tensor of one element, got ",
              pred.defined() ? pred.shape_string() : "undefined");
  if (!detail::is_tracing()) return pred.item() != 0 ? then_fn(args) : else_fn(args);
  std::vector<Tensor> a = run_branch(then_fn, args, "then_fn");
  std::vector<Tensor> b = run_branch(else_fn, args, "else_fn");
  LATHE_CHECK(a.size() == b.size(), "[cond] then_fn returns ", a.size(), " tensors, else_fn ",
              b.size(), "; both branches must return the same number");
  Tensor p = pred.dtype() == DType::b8 ? pred : ne(pred, 0.0);
  p = p.reshape({});
  std::vector<Tensor> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    LATHE_CHECK(a[i].dtype() == b[i].dtype() && a[i].sizes() == b[i].sizes(), "[cond] output ", i,
                " is ", a[i].shape_string(), " in then_fn and ", b[i].shape_string(),
                " in else_fn; the branches must return tensors of the same dtype and sizes");
    out.push_back(where(p, a[i], b[i]));
  }
  return out;
}

}  // namespace lathe
