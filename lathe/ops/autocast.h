// Autocast: mixed precision by op, PyTorch's CPU autocast policy (torch.autocast("cpu",
// dtype=torch.bfloat16)). Inside an AutocastGuard scope every op dispatched on the thread is
// looked up in one table (autocast_policy):
//   lower       conv2d, linear, matmul, scaled_dot_product_attention: floating inputs are cast
//               to the autocast dtype (bf16 by default; f64 stays), so they run on the bf16
//               kernels (f32 accumulation) and return bf16;
//   fp32        nll_loss (and cross_entropy as a whole): low-precision inputs are cast to f32;
//   f32_compute batch_norm, layer_norm: a low-precision input is computed in f32 against the f32
//               weights and statistics (running statistics are updated in place, in f32) and the
//               result cast back to the input's dtype, as PyTorch's mixed-dtype CPU kernels do;
//   promote     cat, stack, where: inputs are cast to the widest floating dtype among them;
//   none        everything else runs on the dtypes it gets (binary ops promote bf16 + f32 to f32;
//               softmax and reductions compute in f32 and round once).
// The casts are ordinary ops, dispatched below autocast: the autograd tape records them
// (gradients reach f32 parameters in f32), and so does the tracer under lathe::compile, whose
// entries guard on the autocast state. Nested scopes work as PyTorch's (an inner
// AutocastGuard(dtype, false) turns it off for its scope).
#pragma once

#include <string>

#include "lathe/core/autocast_state.h"
#include "lathe/core/tensor.h"
#include "lathe/ops/op_def.h"

namespace lathe {

class AutocastGuard {
 public:
  // dtype: bf16 (the default) or f16; throws lathe::Error for another.
  explicit AutocastGuard(DType dtype = DType::bf16, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  detail::AutocastState previous_;
};

bool is_autocast_enabled();
DType autocast_dtype();

enum class AutocastPolicy { none, lower, fp32, f32_compute, promote };
const char* autocast_policy_name(AutocastPolicy p);
// The policy of an op (by OpDef name; none when the table does not list it).
AutocastPolicy autocast_policy(const std::string& op_name);

// x cast to f32 when autocast is on and x is of low precision, else x: for composite functions
// that PyTorch lists as fp32 as a whole (cross_entropy).
Tensor autocast_to_f32(const Tensor& x);

namespace detail {
// lathe::dispatch's first step while autocast is enabled: applies the op's policy, then
// dispatches the op (and the casts) with autocast off for the call.
std::vector<Tensor> autocast_dispatch(const OpDef& op, TensorList inputs, const Attrs& attrs);
}  // namespace detail

}  // namespace lathe
