// Dropout of inf and NaN (issue 33): a dropped element is x * 0, as PyTorch's mask multiply
// gives (NaN for inf or NaN, -0 for a negative x), a kept one x / (1 - p). Eager's kernel wrote a
// plain 0 for a dropped inf while the traced graph (x * mask) gave NaN; now eager, the compiled
// graph with grad on (the mask path) and off (the dropout op itself) agree, on both backends.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"

using namespace lathe;
using V = std::vector<Tensor>;

namespace {

// 64 values: +inf, -inf, NaN, negative and positive finite ones, in turn.
Tensor special_values() {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v;
  for (int i = 0; v.size() < 64; ++i) {
    const float cycle[] = {inf, -inf, nan, -1.5f - i, 0.25f + i};
    v.push_back(cycle[i % 5]);
  }
  return from_vector(v, {64});
}

// Same bits, but every NaN equal to every NaN.
bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// y is dropout(x) with the elements dropped where `mask` is 0, by PyTorch's rule.
void expect_dropout_rule(const Tensor& y, const Tensor& x, const Tensor& mask, double p,
                         const std::string& what) {
  auto yv = y.to_vector<float>(), xv = x.to_vector<float>(), mv = mask.to_vector<float>();
  int dropped = 0, kept = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const bool drop = mv[i] == 0;
    const float want = drop ? xv[i] * 0.0f : static_cast<float>(xv[i] / (1.0 - p));
    (drop ? dropped : kept)++;
    EXPECT_TRUE(same_float(yv[i], want))
        << what << " element " << i << " (x = " << xv[i] << ", " << (drop ? "dropped" : "kept")
        << "): " << yv[i] << ", want " << want;
  }
  // Both branches are exercised (the seed is fixed).
  EXPECT_GT(dropped, 0) << what;
  if (p < 1) {
    EXPECT_GT(kept, 0) << what;
  }
}

struct DropoutCase {
  std::string backend;
  double p;
  bool grad;
};

void PrintTo(const DropoutCase& c, std::ostream* os) {
  *os << c.backend << " p=" << c.p << (c.grad ? " grad" : " no grad");
}

class DropoutNonFinite : public ::testing::TestWithParam<DropoutCase> {};
INSTANTIATE_TEST_SUITE_P(
    All, DropoutNonFinite,
    ::testing::Values(DropoutCase{"interpreter", 0.5, true}, DropoutCase{"interpreter", 0.5, false},
                      DropoutCase{"cpu", 0.5, true}, DropoutCase{"cpu", 0.5, false},
                      DropoutCase{"cpu", 1.0, true}, DropoutCase{"cpu", 1.0, false}),
    [](const auto& info) {
      return info.param.backend + (info.param.p == 1.0 ? "_p1" : "_p05") +
             (info.param.grad ? "_grad" : "_nograd");
    });

TEST_P(DropoutNonFinite, EagerAndCompiledDropToXTimesZero) {
  const DropoutCase c = GetParam();
  GradMode::set_enabled(c.grad);
  struct Restore {
    ~Restore() { GradMode::set_enabled(true); }
  } restore;
  const Tensor x = special_values();
  const double p = c.p;
  CompileOptions o;
  o.backend = c.backend;
  auto f = compile([p](const V& a) { return V{dropout(a[0], p, true)}; }, o);
  for (uint64_t seed : {1, 2}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    manual_seed(seed);
    Tensor mask = dropout(ones({64}), p, true);
    manual_seed(seed);
    Tensor eager = dropout(x, p, true);
    manual_seed(seed);
    Tensor compiled = f({x})[0];
    expect_dropout_rule(eager, x, mask, p, "eager");
    expect_dropout_rule(compiled, x, mask, p, "compiled");
  }
  EXPECT_EQ(f.stats().compiles, 1);
}

}  // namespace
