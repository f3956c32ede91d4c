// kernels::copy_into between any two layouts of a shape (lathe/kernels/dnnl_common.h): every
// element lands where its index says, for the nchw -> nhwc copy of images with few channels (the
// case the two-level inner loop exists for), its inverse, permuted 3-d and 5-d views, a single
// row, a single element and shapes with size-1 dims, on 1 and 2 threads.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/core/threads.h"
#include "lathe/kernels/dnnl_common.h"

namespace lathe::detail {
namespace {

// A tensor of `sizes` laid out with dims ordered `order` (outermost first), holding its own
// linear index in logical (row-major) order.
Tensor numbered(const std::vector<int64_t>& sizes, const std::vector<int64_t>& order) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = s;
    s *= std::max<int64_t>(sizes[*it], 1);
  }
  Tensor t = empty_strided(to_shape(sizes), to_shape(strides), DType::f32);
  float* p = static_cast<float*>(t.raw_data());
  const int64_t n = t.numel();
  for (int64_t lin = 0; lin < n; ++lin) {
    int64_t rem = lin, off = 0;
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      off += (rem % sizes[d]) * strides[d];
      rem /= sizes[d];
    }
    p[off] = static_cast<float>(lin);
  }
  return t;
}

// Reads every element through the tensor's own strides (not through a copy, which is what is
// under test) and checks it holds its logical index.
void expect_numbered(const Tensor& t, const std::string& what) {
  const std::vector<int64_t> sizes = t.shape(), strides = t.int_strides();
  const float* p = static_cast<const float*>(t.raw_data());
  for (int64_t lin = 0; lin < t.numel(); ++lin) {
    int64_t rem = lin, off = 0;
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      off += (rem % sizes[d]) * strides[d];
      rem /= sizes[d];
    }
    ASSERT_EQ(p[off], static_cast<float>(lin)) << what << " element " << lin;
  }
}

struct Case {
  std::vector<int64_t> sizes, from, to;
};

TEST(StridedCopy, EveryElementLandsAtItsIndex) {
  const std::vector<Case> cases = {
      {{1, 3, 224, 224}, {0, 1, 2, 3}, {0, 2, 3, 1}},  // nchw -> nhwc, an image
      {{2, 3, 17, 9}, {0, 1, 2, 3}, {0, 2, 3, 1}},
      {{2, 1, 5, 7}, {0, 1, 2, 3}, {0, 2, 3, 1}},
      {{3, 4, 6, 5}, {0, 2, 3, 1}, {0, 1, 2, 3}},  // nhwc -> nchw
      {{8, 16, 7, 7}, {0, 2, 3, 1}, {0, 1, 2, 3}},
      {{33, 65}, {1, 0}, {0, 1}},  // a transpose
      {{4, 5, 6}, {2, 0, 1}, {1, 2, 0}},
      {{2, 3, 4, 5, 6}, {4, 3, 2, 1, 0}, {0, 1, 2, 3, 4}},
      {{1, 1, 1, 9}, {0, 1, 2, 3}, {3, 2, 1, 0}},  // one row
      {{1, 1}, {0, 1}, {1, 0}},                    // one element
      {{5, 1, 3}, {0, 1, 2}, {2, 1, 0}},
  };
  const int before = num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const Case& c : cases) {
      Tensor src = numbered(c.sizes, c.from);
      Tensor dst = numbered(c.sizes, c.to);
      float* p = static_cast<float*>(dst.raw_data());
      std::fill(p, p + dst.numel(), -1.0f);
      copy_into(dst, src);
      expect_numbered(dst, src.shape_string() + " on " + std::to_string(threads) + " threads");
    }
  }
  set_num_threads(before);
}

TEST(StridedCopy, ChannelsLastCopyOfAnImage) {
  Tensor x = numbered({2, 3, 31, 29}, {0, 1, 2, 3});
  Tensor y = to_channels_last_copy(x);
  EXPECT_TRUE(y.is_channels_last());
  expect_numbered(y, "to_channels_last_copy");
}

}  // namespace
}  // namespace lathe::detail
