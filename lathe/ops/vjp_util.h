// Helpers shared by the vjp rules (vjp_elementwise.cpp, vjp_shape.cpp, vjp_nn.cpp). They are
// written with ops and sizes (SymInt) only, so the rules also run on traced tensors.
#pragma once

#include <vector>

#include "lathe/ops/op_def.h"

namespace lathe::detail {

// g summed down to `shape` (the reverse of numpy broadcasting from `shape` to g's sizes).
Tensor sum_to(const Tensor& g, const Shape& shape);
// n as a 0-d tensor of dtype dt (a graph computation of the size when n is symbolic).
Tensor size_tensor(SymInt n, DType dt);
// The product of x's sizes over `dims` (all dims when empty).
SymInt numel_over(const Tensor& x, const std::vector<int64_t>& dims);
// g of a reduction over `dims` (attribute "dims"; empty = all) expanded back to x's sizes.
Tensor expand_reduced(const Tensor& g, const Tensor& x, const Attrs& a);

// t (a tensor a rule or the engine made on the CPU: zeros, ones, a mask, class indices) on
// ref's device: moved to the lazy device when ref lives there, so backward through a model on
// the lazy device records its whole graph there; t itself otherwise.
Tensor on_device_of(const Tensor& t, const Tensor& ref);

// Attaches a vjp to a registered op. reads_inputs: the inputs whose values the rule reads
// (others reach it as sizes only); reads_outputs: whether it reads the outputs.
struct VjpReads {
  std::vector<int> inputs;
  bool outputs = false;
};
void set_vjp(OpRegistry& r, const char* name, VjpReads reads, VjpRule rule);

void register_elementwise_vjps(OpRegistry& r);  // vjp_elementwise.cpp
void register_shape_vjps(OpRegistry& r);        // vjp_shape.cpp
void register_nn_vjps(OpRegistry& r);           // vjp_nn.cpp

}  // namespace lathe::detail
