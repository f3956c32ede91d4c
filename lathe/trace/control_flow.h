// Control flow that stays in one graph: lathe::cond picks between two branches by a tensor's
// value without reading it on the host, so a compiled function branching on data needs no graph
// break.
#pragma once

#include <functional>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe {

using Branch = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// then_fn(args) where pred (a one-element bool or number tensor) is true, else else_fn(args).
// Eagerly it reads pred and runs one branch. While traced (lathe::compile) it records both
// branches and selects their outputs elementwise with where(pred, then, else), as one graph: the
// branches must return the same number of tensors with the same dtypes and sizes, and must not
// write tensors in place (a write would happen whichever branch is taken); both are checked, with
// an error naming the output or the branch. Gradients flow into the taken branch only (where's
// vjp). Both branches are computed while traced: keep expensive branches out of cond, or let the
// function break the graph at pred.item().
std::vector<Tensor> cond(const Tensor& pred, const Branch& then_fn, const Branch& else_fn,
                         const std::vector<Tensor>& args);

}  // namespace lathe
