// Typed attribute access (ParsedAttrs): conv2d, conv2d_fused, linear_fused and the pooling ops
// parse their attributes once where they stop changing (graph nodes, interpreter steps); the rule
// and kernel give the same results from the parsed form as by name, set() drops it, and
// attributes the parser rejects stay unparsed so the rule still reports them.
#include <gtest/gtest.h>

#include <string>

#include "lathe/core/random.h"
#include "lathe/ir/graph.h"
#include "lathe/ops/op_def.h"
#include "lathe/ops/ops.h"

namespace lathe {
namespace {

const OpDef& op(const char* name) { return OpRegistry::global().get(name); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Attrs conv_attrs() {
  return Attrs{{"stride", Shape{2, 1}},
               {"padding", Shape{1, 0}},
               {"dilation", Shape{1, 2}},
               {"groups", int64_t{2}}};
}

Attrs conv_fused_attrs(const char* act) {
  Attrs a = conv_attrs();
  a.set("eps", 1e-3).set("act", std::string(act)).set("act_min", -0.5).set("act_max", 0.75);
  a.set("act2", std::string("relu")).set("act2_min", 0.0).set("act2_max", 0.0);
  return a;
}

Attrs pool_attrs(bool max) {
  Attrs a{{"kernel", Shape{3, 2}},
          {"stride", Shape{2, 1}},
          {"padding", Shape{1, 1}},
          {"ceil_mode", true}};
  if (max)
    a.set("dilation", Shape{1, 1});
  else
    a.set("count_include_pad", false);
  return a;
}

// Runs op's rule and kernel with attrs read by name and with their parsed form; both must agree
// exactly (same kernel, same parameters).
void expect_parsed_matches(const char* name, const std::vector<Tensor>& in, const Attrs& plain) {
  SCOPED_TRACE(name);
  const OpDef& o = op(name);
  Attrs parsed = plain;
  attach_parsed_attrs(o, parsed);
  ASSERT_TRUE(parsed.has_parsed());
  ASSERT_FALSE(plain.has_parsed());
  std::vector<TensorMeta> m1 = o.shape(in, plain), m2 = o.shape(in, parsed);
  ASSERT_EQ(m1.size(), m2.size());
  EXPECT_EQ(m1[0].sizes, m2[0].sizes);
  EXPECT_EQ(m1[0].strides, m2[0].strides);
  Tensor y1 = o.kernel(in, plain, m1)[0], y2 = o.kernel(in, parsed, m2)[0];
  EXPECT_EQ(y1.to_vector<float>(), y2.to_vector<float>());
}

TEST(ParsedAttrs, RulesAndKernelsAgreeWithReadingByName) {
  manual_seed(11);
  Tensor x = randn({2, 4, 9, 8});
  Tensor w = randn({6, 2, 3, 2});
  Tensor b = randn({6});
  expect_parsed_matches("conv2d", {x, w, b}, conv_attrs());
  const std::vector<TensorMeta> out =
      op("conv2d").shape(std::vector<Tensor>{x, w, b}, conv_attrs());
  std::vector<int64_t> out_shape = to_ints(out[0].sizes);
  Tensor residual = randn(to_shape(out_shape));
  Tensor mean = randn({6}), var = rand({6}) + 0.5, gamma = randn({6}), beta = randn({6});
  for (const char* act : {"none", "relu", "clip", "gelu", "gelu_tanh"}) {
    expect_parsed_matches("conv2d_fused", {x, w, b, mean, var, gamma, beta, residual},
                          conv_fused_attrs(act));
    expect_parsed_matches("conv2d_fused", {x, w, b, {}, {}, {}, {}, {}}, conv_fused_attrs(act));
  }
  Tensor lx = randn({3, 5}), lw = randn({7, 5}), lb = randn({7}), lr = randn({3, 7});
  for (const char* act : {"none", "relu", "gelu"})
    expect_parsed_matches("linear_fused", {lx, lw, lb, lr}, Attrs{{"act", std::string(act)}});
  expect_parsed_matches("max_pool2d", {x}, pool_attrs(true));
  expect_parsed_matches("avg_pool2d", {x}, pool_attrs(false));
}

TEST(ParsedAttrs, GraphNodesCarryTheParsedForm) {
  ir::Graph g;
  ir::Value* x = g.add_input({DType::f32, Device::cpu(), Shape{1, 4, 8, 8}, {}}, {});
  ir::Value* w = g.add_input({DType::f32, Device::cpu(), Shape{6, 2, 3, 2}, {}}, {});
  ir::Node* conv = g.add_node(op("conv2d"), {x, w, nullptr}, conv_attrs(),
                              {{DType::f32, Device::cpu(), Shape{1, 6, 4, 3}, {}}});
  EXPECT_TRUE(conv->attrs().has_parsed());
  ir::Node* pool = g.add_node(op("max_pool2d"), {x}, pool_attrs(true),
                              {{DType::f32, Device::cpu(), Shape{1, 4, 5, 9}, {}}});
  EXPECT_TRUE(pool->attrs().has_parsed());
  ir::Node* relu =
      g.add_node(op("relu"), {x}, {}, {{DType::f32, Device::cpu(), Shape{1, 4, 8, 8}, {}}});
  EXPECT_FALSE(relu->attrs().has_parsed());  // no attributes, no parser
}

TEST(ParsedAttrs, SetDropsTheParsedForm) {
  manual_seed(12);
  Tensor x = randn({1, 4, 9, 8}), w = randn({6, 2, 3, 2});
  Attrs a = conv_attrs();
  attach_parsed_attrs(op("conv2d"), a);
  ASSERT_TRUE(a.has_parsed());
  a.set("stride", Shape{1, 1});
  EXPECT_FALSE(a.has_parsed());
  // The rule sees the new stride: [1,6,9,6] (stride 1, padding [1,0], dilation [1,2]).
  EXPECT_EQ(op("conv2d").shape(std::vector<Tensor>{x, w, Tensor()}, a)[0].sizes,
            (Shape{1, 6, 9, 6}));
}

TEST(ParsedAttrs, RejectedAttributesStayUnparsedAndTheRuleReportsThem) {
  manual_seed(13);
  Tensor x = randn({1, 4, 9, 8}), w = randn({6, 2, 3, 2});
  Attrs bad = conv_attrs();
  bad.set("stride", Shape{1, 1, 1});
  attach_parsed_attrs(op("conv2d"), bad);
  EXPECT_FALSE(bad.has_parsed());
  EXPECT_NE(error_of([&] {
              op("conv2d").shape(std::vector<Tensor>{x, w, Tensor()}, bad);
            }).find("[conv2d] stride must have 1 or 2 values"),
            std::string::npos);
  // conv2d_fused with batch norm inputs needs eps, parsed or not.
  Attrs no_eps = conv_attrs();
  no_eps.set("act", std::string("none")).set("act_min", 0.0).set("act_max", 0.0);
  no_eps.set("act2", std::string("none")).set("act2_min", 0.0).set("act2_max", 0.0);
  attach_parsed_attrs(op("conv2d_fused"), no_eps);
  EXPECT_TRUE(no_eps.has_parsed());
  Tensor c = randn({6});
  EXPECT_NE(error_of([&] {
              op("conv2d_fused").shape(std::vector<Tensor>{x, w, c, c, c, c, c, {}}, no_eps);
            }).find("missing attribute 'eps'"),
            std::string::npos);
}

}  // namespace
}  // namespace lathe
