// The verifier: accepts well-formed graphs (static and symbolic) and rejects each kind of
// malformed one with a message naming the node.
#include <gtest/gtest.h>

#include "ir_test_util.h"
#include "lathe/sym/shape_env.h"

namespace lathe::ir {
namespace {

using namespace testing;
using S = detail::GraphSurgery;

std::string verify_error(const Graph& g) {
  try {
    g.verify();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// %0 = x [2,3]; %1 = w [3,4]; %2 = relu(%0); %3 = matmul(%2, %1)
struct Small {
  Graph g;
  Value* x = g.add_input(T({2, 3}), arg(0));
  Value* w = g.add_input(T({3, 4}), arg(1));
  Node* relu = g.add_node(op("relu"), {x}, {}, {T({2, 3})});
  Node* mm = g.add_node(op("matmul"), {relu->output(), w}, {}, {T({2, 4})});
  Small() { g.set_outputs({mm->output()}); }
};

TEST(Verify, AcceptsConvBatchNormViewGraph) {
  Graph g;
  Value* x = g.add_input(T({2, 3, 8, 8}), arg(0));
  Value* w = g.add_input(T({4, 3, 3, 3}), cap(1, "conv.weight"));
  Value* b = g.add_input(T({4}), cap(2, "conv.bias"));
  Value* rm = g.add_input(T({4}), cap(3, "bn.running_mean"));
  Value* rv = g.add_input(T({4}), cap(4, "bn.running_var"));
  Value* c = g.add_node(op("conv2d"), {x, w, b},
                        Attrs{{"stride", to_shape({2, 2})},
                              {"padding", to_shape({1, 1})},
                              {"dilation", to_shape({1, 1})},
                              {"groups", int64_t{1}}},
                        {T({2, 4, 4, 4})})
                 ->output();
  Value* n =
      g.add_node(op("batch_norm"), {c, rm, rv, nullptr, nullptr},
                 Attrs{{"training", true}, {"momentum", 0.1}, {"eps", 1e-5}}, {T({2, 4, 4, 4})})
          ->output();
  ValueType vt = T({2, 64});
  vt.strides = {64, 1};
  Value* v = g.add_node(op("view"), {n}, Attrs{{"size", to_shape({2, 64})}}, {vt})->output();
  g.set_outputs({v});
  EXPECT_NO_THROW(g.verify());
}

TEST(Verify, AcceptsSymbolicSizesWithoutNewGuards) {
  sym::ShapeEnv env;
  SymInt s0 = env.create_symbol(5, sym::Source::size(0, 0), sym::DimPolicy::kDynamic);
  Graph g;
  Value* x = g.add_input(T({s0, 3}), arg(0));
  Value* y = g.add_input(T({3}), arg(1));
  Value* a = g.add_node(op("add"), {x, y}, Attrs{{"alpha", 1.0}}, {T({s0, 3})})->output();
  Value* r = g.add_node(op("relu"), {a}, {}, {T({s0, 3})})->output();
  g.set_outputs({r});
  EXPECT_NO_THROW(g.verify());
  EXPECT_EQ(env.guards().size(), 0u) << env.format_guards();
  // A different symbolic size is caught structurally.
  SymInt s1 = env.create_symbol(7, sym::Source::size(1, 0), sym::DimPolicy::kDynamic);
  Graph bad;
  Value* bx = bad.add_input(T({s0, 3}), arg(0));
  Value* br = bad.add_node(op("relu"), {bx}, {}, {T({s1, 3})})->output();
  bad.set_outputs({br});
  EXPECT_EQ(verify_error(bad),
            "[ir.verify] node %1 (relu): output 0 (%1) has type f32[s1,3] but the shape rule "
            "gives f32[s0,3]");
  EXPECT_EQ(env.guards().size(), 0u) << env.format_guards();
}

TEST(Verify, RejectsUseBeforeDefinition) {
  Small s;
  S::move_last_node(s.g, 0);  // matmul now runs before the relu it reads
  EXPECT_EQ(verify_error(s.g),
            "[ir.verify] node %3 (matmul): input 0 (%2) is not defined before the node (dangling "
            "or used before its definition)");
}

TEST(Verify, RejectsDanglingValuesFromAnotherGraph) {
  Small s;
  Graph other;
  Value* foreign = other.add_input(T({3, 4}), arg(0));
  S::node_inputs(*s.mm)[1] = foreign;
  EXPECT_EQ(verify_error(s.g),
            "[ir.verify] node %3 (matmul): input 1 is not a value of this graph");
  Small t;
  S::outputs(t.g)[0] = foreign;
  EXPECT_EQ(verify_error(t.g), "[ir.verify] graph output 0 is not a value of this graph");
}

TEST(Verify, RejectsValuesDefinedTwice) {
  Small s;
  S::inputs(s.g).push_back(s.x);
  S::sources(s.g).push_back(arg(2));
  EXPECT_EQ(verify_error(s.g), "[ir.verify] value %0 is defined twice (graph input 2)");
  Small t;
  // The matmul claims the relu's output as its own.
  S::node_outputs(*t.mm).push_back(t.relu->output());
  EXPECT_EQ(verify_error(t.g),
            "[ir.verify] node %3 (matmul): output 1 (%2) names another producer");
  Small u;
  S::inputs(u.g).push_back(u.relu->output());
  S::sources(u.g).push_back(arg(2));
  EXPECT_EQ(verify_error(u.g), "[ir.verify] graph input 2 (%2) is also produced by node %2");
}

TEST(Verify, RejectsWrongInputCount) {
  Small s;
  S::node_inputs(*s.relu).push_back(s.x);
  S::users(*s.x).push_back(s.relu);
  EXPECT_EQ(verify_error(s.g), "[ir.verify] node %2 (relu): the op takes 1 inputs, got 2");
}

TEST(Verify, RejectsStridesOfAnotherRank) {
  Small s;
  s.x->mutable_type().strides = {1};
  EXPECT_EQ(verify_error(s.g), "[ir.verify] value %0 has 2 sizes but 1 strides");
}

TEST(Verify, RejectsInconsistentUsers) {
  Small s;
  S::users(*s.x).clear();
  EXPECT_EQ(verify_error(s.g), "[ir.verify] value %0 lists 0 users but has 1 uses");
}

TEST(Verify, RejectsOutputTypesTheShapeRuleDoesNotGive) {
  {
    Graph g;
    Value* x = g.add_input(T({2, 3}), arg(0));
    Value* w = g.add_input(T({3, 4}), arg(1));
    g.add_node(op("matmul"), {x, w}, {}, {T({2, 5})});
    EXPECT_EQ(verify_error(g),
              "[ir.verify] node %2 (matmul): output 0 (%2) has type f32[2,5] but the shape rule "
              "gives f32[2,4]");
  }
  {
    Graph g;
    Value* x = g.add_input(T({2, 3}), arg(0));
    g.add_node(op("relu"), {x}, {}, {T({2, 3}, DType::i64)});
    EXPECT_EQ(verify_error(g),
              "[ir.verify] node %1 (relu): output 0 (%1) has type i64[2,3] but the shape rule "
              "gives f32[2,3]");
  }
  {
    Graph g;
    Value* x = g.add_input(T({2, 3}), arg(0));
    g.add_node(op("relu"), {x}, {}, {T({2, 3}), T({2, 3})});
    EXPECT_EQ(verify_error(g),
              "[ir.verify] node %1 (relu): the shape rule gives 1 outputs, the node has 2");
  }
  {  // a view's strides are checked when the value records them
    Graph g;
    Value* x = g.add_input(T({2, 6}), arg(0));
    ValueType vt = T({3, 4});
    vt.strides = {1, 3};
    g.add_node(op("view"), {x}, Attrs{{"size", to_shape({3, 4})}}, {vt});
    EXPECT_EQ(verify_error(g),
              "[ir.verify] node %1 (view): output 0 (%1) has type f32[3,4]{1,3} but the shape "
              "rule gives f32[3,4]");
  }
}

TEST(Verify, RejectsInputsTheShapeRuleRejects) {
  Graph g;
  Value* x = g.add_input(T({2, 3}), arg(0));
  Value* w = g.add_input(T({5, 4}), arg(1));
  g.add_node(op("matmul"), {x, w}, {}, {T({2, 4})});
  std::string msg = verify_error(g);
  EXPECT_EQ(
      msg.rfind("[ir.verify] node %2 (matmul): the shape rule rejects the inputs: [matmul]", 0), 0u)
      << msg;
}

}  // namespace
}  // namespace lathe::ir
