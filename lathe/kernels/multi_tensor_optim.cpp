#include "lathe/kernels/multi_tensor_optim.h"

#include <algorithm>
#include <cmath>

#include "lathe/core/error.h"
#include "lathe/core/threads.h"

namespace lathe::detail {
namespace {

// Work items of at most kBlock elements of one slot, so threads share big and small parameters
// evenly in one parallel loop.
constexpr int64_t kBlock = 1 << 15;
struct Block {
  size_t slot;
  int64_t begin, end;
};

template <class Slot>
std::vector<Block> blocks_of(const std::vector<Slot>& slots) {
  std::vector<Block> r;
  for (size_t s = 0; s < slots.size(); ++s)
    for (int64_t b = 0; b < slots[s].n; b += kBlock)
      r.push_back({s, b, std::min(slots[s].n, b + kBlock)});
  return r;
}

// Each line mirrors one op of SGD::step (optimizer.cpp): scalars are cast to T as the
// elementwise kernels cast them, and every intermediate is rounded to T as a stored tensor is.
// The elementwise kernels are built with FMA and GCC contracts their `x + alpha * y` into one
// fused multiply-add, so add / add_ with alpha appear here as std::fma (explicit, so that no
// other product gets contracted instead).
template <class T>
void sgd_block(const SgdSlot& s, int64_t b, int64_t e, const SgdHyper& h) {
  T* p = static_cast<T*>(s.param);
  const T* g = static_cast<const T*>(s.grad);
  T* buf = static_cast<T*>(s.momentum_buffer);
  const T wd = static_cast<T>(h.weight_decay), mom = static_cast<T>(h.momentum);
  const T damp = static_cast<T>(1 - h.dampening), neg_lr = static_cast<T>(-h.lr);
  const bool has_wd = h.weight_decay != 0, has_mom = h.momentum != 0;
  for (int64_t i = b; i < e; ++i) {
    T gi = g[i];
    if (has_wd) gi = std::fma(wd, p[i], gi);
    if (has_mom) {
      T bi;
      if (s.first) {
        bi = gi;
      } else {
        const T decayed = buf[i] * mom;
        bi = std::fma(damp, gi, decayed);
      }
      buf[i] = bi;
      gi = h.nesterov ? std::fma(mom, bi, gi) : bi;
    }
    p[i] = std::fma(neg_lr, gi, p[i]);
  }
}

// Mirrors Adam::step.
template <class T>
void adam_block(const AdamSlot& s, int64_t b, int64_t e, const AdamHyper& h) {
  T* p = static_cast<T*>(s.param);
  const T* g = static_cast<const T*>(s.grad);
  T* m = static_cast<T*>(s.exp_avg);
  T* v = static_cast<T*>(s.exp_avg_sq);
  const double bc1 = 1 - std::pow(h.beta1, s.step), bc2 = 1 - std::pow(h.beta2, s.step);
  const T decay = static_cast<T>(1 - h.lr * h.weight_decay), wd = static_cast<T>(h.weight_decay);
  const T b1 = static_cast<T>(h.beta1), one_b1 = static_cast<T>(1 - h.beta1);
  const T b2 = static_cast<T>(h.beta2), one_b2 = static_cast<T>(1 - h.beta2);
  const T sqrt_bc2 = static_cast<T>(std::sqrt(bc2)), eps = static_cast<T>(h.eps);
  const T step = static_cast<T>(-h.lr / bc1);
  const bool has_wd = h.weight_decay != 0;
  for (int64_t i = b; i < e; ++i) {
    T pi = p[i], gi = g[i];
    if (has_wd) {
      if (h.decoupled_weight_decay)
        pi = static_cast<T>(pi * decay);
      else
        gi = std::fma(wd, pi, gi);
    }
    const T m_decayed = m[i] * b1;
    const T mi = std::fma(one_b1, gi, m_decayed);
    const T gg = gi * gi;
    const T v_decayed = v[i] * b2;
    const T vi = std::fma(one_b2, gg, v_decayed);
    const T root = std::sqrt(vi);
    const T scaled = root / sqrt_bc2;
    const T denom = scaled + eps;
    const T q = mi / denom;
    m[i] = mi;
    v[i] = vi;
    p[i] = std::fma(step, q, pi);
  }
}

template <class Slot, class Hyper, class F32, class F64>
void run_blocks(DType dtype, const std::vector<Slot>& slots, const Hyper& h, F32 f32, F64 f64,
                const char* op) {
  LATHE_CHECK(dtype == DType::f32 || dtype == DType::f64, "[", op,
              "] fused steps take f32 or f64 parameters, got ", dtype_name(dtype));
  const std::vector<Block> blocks = blocks_of(slots);
  const int64_t nb = static_cast<int64_t>(blocks.size());
  const int nt = lathe::num_threads();
#pragma omp parallel for schedule(dynamic, 4) num_threads(nt)
  for (int64_t k = 0; k < nb; ++k) {
    const Block& bl = blocks[k];
    if (dtype == DType::f32)
      f32(slots[bl.slot], bl.begin, bl.end, h);
    else
      f64(slots[bl.slot], bl.begin, bl.end, h);
  }
}

}  // namespace

void multi_tensor_sgd(DType dtype, const std::vector<SgdSlot>& slots, const SgdHyper& h) {
  run_blocks(dtype, slots, h, sgd_block<float>, sgd_block<double>, "SGD");
}

void multi_tensor_adam(DType dtype, const std::vector<AdamSlot>& slots, const AdamHyper& h) {
  run_blocks(dtype, slots, h, adam_block<float>, adam_block<double>, "Adam");
}

}  // namespace lathe::detail
