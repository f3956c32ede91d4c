// Regression: the reordered-weight cache returned a dead weight's buffer when a new weight's
// storage reused its address (same offset, version and shape).
#include <gtest/gtest.h>

#include "lathe/core/random.h"
#include "lathe/ops/ops.h"

using namespace lathe;

TEST(WeightCacheRegression, FreshWeightAtReusedAddressIsNotServedStale) {
  manual_seed(0);
  Tensor x = randn({1, 3, 6, 6});
  Tensor xr = x.to(DType::f64);
  int bad = 0;
  for (int it = 0; it < 50; ++it) {
    Tensor y, yr;
    {
      Tensor w = randn({4, 3, 3, 3});  // freed at the end of the scope; the next may reuse it
      y = conv2d(x, w);
      yr = conv2d(xr, w.to(DType::f64));
    }
    if (amax(abs(sub(y, yr.to(DType::f32)))).item() > 1e-3) ++bad;
  }
  EXPECT_EQ(bad, 0);
}
