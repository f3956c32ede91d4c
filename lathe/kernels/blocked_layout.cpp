#include "lathe/kernels/blocked_layout.h"

#include <cstring>

#include "lathe/core/threads.h"
#include "lathe/kernels/elementwise.h"

namespace lathe::kernels {
namespace {

// x [N, C, H, W] as [N, C/B, H, W, B]: channel c is block c / B, lane c % B (a strided view).
Tensor split_channels(const Tensor& x, int64_t block) {
  auto z = x.shape();
  auto st = x.int_strides();
  return x.as_strided(to_shape({z[0], z[1] / block, z[2], z[3], block}),
                      to_shape({st[0], st[1] * block, st[2], st[3], st[1]}), x.storage_offset());
}

// The fast case: the 4-d side is f32 channels-last (channel stride 1, pixel stride C), so each
// block of B channels of a pixel is B consecutive floats on both sides.
bool fast_case(const Tensor& plain, const Tensor& blocked) {
  if (plain.dtype() != DType::f32 || blocked.dtype() != DType::f32 || !blocked.is_contiguous())
    return false;
  auto z = plain.shape();
  auto st = plain.int_strides();
  return st[1] == 1 && st[3] == z[1] && st[2] == z[1] * z[3];
}

// Moves B floats per (pixel, block) between the two layouts; kToBlocked picks the direction.
template <bool kToBlocked, int64_t B>
void reorder(const Tensor& plain, const Tensor& blocked) {
  auto z = plain.shape();
  const int64_t N = z[0], C = z[1], H = z[2], W = z[3];
  const int64_t CB = C / B;
  const int64_t n_stride = plain.int_strides()[0];
  float* p = static_cast<float*>(plain.raw_data());
  float* b = static_cast<float*>(blocked.raw_data());
  const int64_t rows = N * H;
  const int nt = rows * W * C < 32768 ? 1 : lathe::num_threads();
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = r / H, h = r % H;
    float* prow = p + n * n_stride + h * W * C;
    for (int64_t cb = 0; cb < CB; ++cb) {
      float* brow = b + ((n * CB + cb) * H + h) * W * B;
      for (int64_t w = 0; w < W; ++w) {
        float* pp = prow + w * C + cb * B;
        float* bp = brow + w * B;
        if constexpr (kToBlocked)
          std::memcpy(bp, pp, B * sizeof(float));
        else
          std::memcpy(pp, bp, B * sizeof(float));
      }
    }
  }
}

template <bool kToBlocked>
void reorder(const Tensor& plain, const Tensor& blocked) {
  if (blocked.sizes()[4].expect_int() == 16)
    reorder<kToBlocked, 16>(plain, blocked);
  else
    reorder<kToBlocked, 8>(plain, blocked);
}

}  // namespace

void to_blocked(const Tensor& x, const Tensor& out) {
  if (x.numel() == 0) return;
  if (fast_case(x, out))
    reorder<true>(x, out);
  else
    copy(out, split_channels(x, out.sizes()[4].expect_int()));
}

void from_blocked(const Tensor& x, const Tensor& out) {
  if (out.numel() == 0) return;
  if (fast_case(out, x))
    reorder<false>(out, x);
  else
    copy(split_channels(out, x.sizes()[4].expect_int()), x);
}

}  // namespace lathe::kernels
