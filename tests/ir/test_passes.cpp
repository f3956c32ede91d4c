// dce and cse: counts, the resulting graph, and unchanged results when run.
#include <gtest/gtest.h>

#include "ir_test_util.h"
#include "lathe/backend/backend.h"
#include "lathe/core/random.h"
#include "lathe/ir/passes.h"
#include "lathe/sym/shape_env.h"

namespace lathe::ir {
namespace {

using namespace testing;

std::vector<Tensor> run(const Graph& g, std::vector<Tensor> inputs) {
  auto exe = backend::create_backend("interpreter")->compile(g);
  return exe->run(inputs, {});
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
}

TEST(DeadCodeElimination, RemovesUnusedChainsKeepsOutputs) {
  Graph g;
  Value* x = g.add_input(T({4}), arg(0));
  Value* a = g.add_node(op("relu"), {x}, {}, {T({4})})->output();  // only feeds dead exp
  Value* b = g.add_node(op("neg"), {x}, {}, {T({4})})->output();   // output
  g.add_node(op("exp"), {a}, {}, {T({4})});                        // unused
  Value* d = g.add_node(op("abs"), {b}, {}, {T({4})})->output();   // output
  g.set_outputs({d, b});
  Tensor in = randn({4});
  auto before = run(g, {in});
  EXPECT_EQ(dead_code_elimination(g), 2);
  EXPECT_EQ(g.to_string(),
            "%0 : f32[4] = input arg0\n"
            "%2 = neg(%0) : f32[4]\n"
            "%4 = abs(%2) : f32[4]\n"
            "return (%4, %2)\n");
  EXPECT_NO_THROW(g.verify());
  auto after = run(g, {in});
  expect_same(before[0], after[0]);
  expect_same(before[1], after[1]);
  EXPECT_EQ(dead_code_elimination(g), 0);
}

TEST(DeadCodeElimination, KeepsNodesThatWriteInPlace) {
  Graph g;
  Value* x = g.add_input(T({2, 3, 4, 4}), arg(0));
  Value* rm = g.add_input(T({3}), cap(1, "bn.running_mean"));
  Value* rv = g.add_input(T({3}), cap(2, "bn.running_var"));
  Value* acc = g.add_input(T({3}), cap(3, "acc"));
  Value* y = g.add_input(T({3}), arg(4));
  // Train-mode batch norm whose result is unused still updates the running stats; add_ too.
  g.add_node(op("batch_norm"), {x, rm, rv, nullptr, nullptr},
             Attrs{{"training", true}, {"momentum", 0.1}, {"eps", 1e-5}}, {T({2, 3, 4, 4})});
  g.add_node(op("add_"), {acc, y}, Attrs{{"alpha", 1.0}}, {T({3})});
  Value* dead = g.add_node(op("sigmoid"), {y}, {}, {T({3})})->output();
  (void)dead;
  Value* out = g.add_node(op("relu"), {y}, {}, {T({3})})->output();
  g.set_outputs({out});
  EXPECT_EQ(dead_code_elimination(g), 1);
  ASSERT_EQ(g.num_nodes(), 3u);
  EXPECT_EQ(g.nodes()[0]->op().name, "batch_norm");
  EXPECT_EQ(g.nodes()[1]->op().name, "add_");
  EXPECT_EQ(g.nodes()[2]->op().name, "relu");
  EXPECT_NO_THROW(g.verify());
}

TEST(CommonSubexpressionElimination, MergesRepeatsAndWhatTheyEnable) {
  Graph g;
  Value* x = g.add_input(T({3, 4}), arg(0));
  Value* a = g.add_node(op("relu"), {x}, {}, {T({3, 4})})->output();
  Value* b = g.add_node(op("relu"), {x}, {}, {T({3, 4})})->output();
  Value* s1 = g.add_node(op("add"), {a, b}, Attrs{{"alpha", 1.0}}, {T({3, 4})})->output();
  Value* s2 = g.add_node(op("add"), {a, b}, Attrs{{"alpha", 1.0}}, {T({3, 4})})->output();
  Value* s3 = g.add_node(op("add"), {a, b}, Attrs{{"alpha", 2.0}}, {T({3, 4})})->output();
  Value* m = g.add_node(op("mul"), {s1, s2}, {}, {T({3, 4})})->output();
  g.set_outputs({m, s3, s2});
  Tensor in = randn({3, 4});
  auto before = run(g, {in});
  // relu %2 absorbs %1; then add %4 and %3 read the same inputs and merge; alpha=2 stays.
  EXPECT_EQ(common_subexpression_elimination(g), 2);
  EXPECT_EQ(g.to_string(),
            "%0 : f32[3,4] = input arg0\n"
            "%1 = relu(%0) : f32[3,4]\n"
            "%3 = add(%1, %1, alpha=1) : f32[3,4]\n"
            "%5 = add(%1, %1, alpha=2) : f32[3,4]\n"
            "%6 = mul(%3, %3) : f32[3,4]\n"
            "return (%6, %5, %3)\n");
  EXPECT_NO_THROW(g.verify());
  auto after = run(g, {in});
  for (size_t i = 0; i < 3; ++i) expect_same(before[i], after[i]);
  EXPECT_EQ(common_subexpression_elimination(g), 0);
}

TEST(CommonSubexpressionElimination, NeverMergesDropoutOrAcrossInPlaceWrites) {
  Graph g;
  Value* x = g.add_input(T({8}), arg(0));
  Value* y = g.add_input(T({8}), arg(1));
  Value* d1 = g.add_node(op("dropout"), {x}, Attrs{{"p", 0.5}}, {T({8})})->output();
  Value* d2 = g.add_node(op("dropout"), {x}, Attrs{{"p", 0.5}}, {T({8})})->output();
  Value* r1 = g.add_node(op("relu"), {x}, {}, {T({8})})->output();
  g.add_node(op("add_"), {x, y}, Attrs{{"alpha", 1.0}}, {T({8})});
  Value* r2 = g.add_node(op("relu"), {x}, {}, {T({8})})->output();  // reads the updated x
  g.set_outputs({d1, d2, r1, r2});
  EXPECT_EQ(common_subexpression_elimination(g), 0);
  EXPECT_EQ(g.num_nodes(), 5u);
  Tensor xin = randn({8}), yin = ones({8});
  Tensor x0 = xin.clone();
  auto out = run(g, {xin, yin});
  // r1 saw x before the add_, r2 after it.
  std::vector<float> xv = x0.to_vector<float>(), r1v = out[2].to_vector<float>(),
                     r2v = out[3].to_vector<float>();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(r1v[i], std::max(xv[i], 0.f));
    EXPECT_EQ(r2v[i], std::max(xv[i] + 1.f, 0.f));
  }
}

TEST(CommonSubexpressionElimination, ComparesSymbolicAttrsStructurally) {
  sym::ShapeEnv env;
  SymInt s0 = env.create_symbol(3, sym::Source::size(0, 0), sym::DimPolicy::kDynamic);
  Graph g;
  Value* x = g.add_input(T({s0, 4}), arg(0));
  Shape sz{s0 * 2, 2};
  Value* v1 = g.add_node(op("view"), {x}, Attrs{{"size", sz}}, {T(sz)})->output();
  Value* v2 = g.add_node(op("view"), {x}, Attrs{{"size", Shape{s0 * 2, 2}}}, {T(sz)})->output();
  Value* v3 = g.add_node(op("view"), {x}, Attrs{{"size", Shape{s0, 4}}}, {T({s0, 4})})->output();
  g.set_outputs({v1, v2, v3});
  EXPECT_EQ(common_subexpression_elimination(g), 1);
  EXPECT_EQ(g.outputs()[0], g.outputs()[1]);
  EXPECT_NE(g.outputs()[0], g.outputs()[2]);
  EXPECT_EQ(env.guards().size(), 0u);
}

}  // namespace
}  // namespace lathe::ir
