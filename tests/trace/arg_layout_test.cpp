// The tracer and the guards share one layout rule (lathe/trace/arg_layout.h): the strides an
// argument is traced with describe the layout the guards then require, for channels-last,
// transposed, permuted, expanded (stride 0), sliced and size-1-dim tensors.
#include "lathe/trace/arg_layout.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"
#include "lathe/trace/guards.h"
#include "lathe/trace/tracer.h"
#include "test_util.h"

using namespace lathe;
using lathe::detail::arg_layout;
using lathe::detail::ArgLayout;
using lathe::detail::Layout;

namespace {

struct Case {
  std::string name;
  Tensor t;
};

std::vector<Case> cases() {
  Tensor base = test::randn_seeded({64}, 1);
  return {
      {"contiguous", test::randn_seeded({2, 3, 4}, 2)},
      {"channels_last", test::randn_seeded({2, 3, 4, 5}, 3).to_channels_last()},
      {"channels_last_1x1", test::randn_seeded({2, 3, 1, 1}, 4).to_channels_last()},
      {"transposed", test::randn_seeded({3, 4}, 5).transpose(0, 1)},
      {"permuted", test::randn_seeded({2, 3, 4}, 6).permute({2, 0, 1})},
      {"transposed_size1", test::randn_seeded({1, 3, 4}, 7).transpose(1, 2)},
      {"expanded", test::randn_seeded({3, 1}, 8).expand({3, 4})},
      {"expanded_leading", test::randn_seeded({4}, 9).expand({2, 4})},
      {"size1_odd_stride", base.as_strided({3, 1, 4}, {4, 100, 1}, 0)},
      {"size1_transposed", base.as_strided({4, 1, 3}, {1, 7, 4}, 0)},
      {"sliced", test::randn_seeded({4, 6}, 10).slice(1, 0, 6, 2)},
  };
}

std::vector<int64_t> ints(const Shape& s) {
  std::vector<int64_t> v;
  for (const SymInt& x : s) v.push_back(x.expect_int());
  return v;
}

// A new tensor with t's sizes and the given strides (over enough fresh storage).
Tensor with_strides(const Tensor& t, const Shape& strides) {
  int64_t extent = 1;
  for (int64_t d = 0; d < t.dim(); ++d)
    extent += (t.sizes()[d].expect_int() - 1) * strides[d].expect_int();
  return test::randn_seeded({extent}, 99).as_strided(t.sizes(), strides, 0);
}

void expect_same_layout(const ArgLayout& a, const ArgLayout& b, const std::string& what) {
  EXPECT_EQ(static_cast<int>(a.kind), static_cast<int>(b.kind)) << what;
  if (a.kind == Layout::kDense && b.kind == Layout::kDense) {
    EXPECT_EQ(a.order_vector(), b.order_vector()) << what;
  }
}

}  // namespace

TEST(ArgLayout, TheTracedStridesHaveTheLayoutTheGuardsRecord) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const ArgLayout want = arg_layout(c.t);
    sym::ShapeEnv env;
    ir::Graph graph;
    detail::Tracer tracer(env, graph, nullptr);
    Tensor fake = tracer.add_argument(c.t, 0, std::vector<detail::DimChoice>(c.t.dim()));
    EXPECT_EQ(ints(graph.inputs()[0]->type().strides), ints(fake.strides()));
    if (want.kind == Layout::kStrided) {
      EXPECT_EQ(ints(fake.strides()), c.t.int_strides());
    }
    // The fake, and a real tensor laid out as traced, classify as the argument did.
    expect_same_layout(arg_layout(fake), want, "fake");
    Tensor as_traced = with_strides(c.t, fake.strides());
    expect_same_layout(arg_layout(as_traced), want, "as traced");
    // The guards recorded for the argument pass for it and for the tensor laid out as traced.
    detail::EntryGuards guards;
    const std::vector<Arg> args{c.t}, traced_args{as_traced};
    guards.record_call(args);
    std::vector<sym::ArgView> views(1);
    detail::make_arg_views(args, views.data());
    EXPECT_TRUE(guards.check(args, views).ok());
    detail::make_arg_views(traced_args, views.data());
    EXPECT_TRUE(guards.check(traced_args, views).ok());
  }
}

TEST(ArgLayout, ACompiledFunctionHitsForTheLayoutItTraced) {
  for (DynamicPolicy policy : {DynamicPolicy::kStatic, DynamicPolicy::kDynamic}) {
    for (const Case& c : cases()) {
      SCOPED_TRACE(c.name + (policy == DynamicPolicy::kStatic ? " static" : " dynamic"));
      CompileOptions o;
      o.dynamic = policy;
      o.backend = "interpreter";
      auto f = compile([](const std::vector<Tensor>& a) { return mul(a[0], 2.0); }, o);
      Tensor got = f({c.t})[0];
      EXPECT_TRUE(test::same_values(got, mul(c.t, 2.0)));
      sym::ShapeEnv env;
      ir::Graph graph;
      detail::Tracer tracer(env, graph, nullptr);
      Tensor fake = tracer.add_argument(c.t, 0, std::vector<detail::DimChoice>(c.t.dim()));
      EXPECT_EQ(f.check_guards({with_strides(c.t, fake.strides())}), 0);
      // A contiguous copy passes exactly when the argument's layout is contiguous.
      const bool contiguous = arg_layout(c.t).kind == Layout::kContiguous;
      EXPECT_EQ(f.check_guards({c.t.contiguous()}), contiguous ? 0 : -1);
    }
  }
}
