// Graph building, printing, editing, structural hash and equality.
#include <gtest/gtest.h>

#include <map>

#include "ir_test_util.h"
#include "lathe/sym/shape_env.h"

namespace lathe::ir {
namespace {

using namespace testing;

// relu, matmul with a captured weight, add of the result to itself; returns two values.
void build_mlp(Graph& g, double alpha = 1.0) {
  Value* x = g.add_input(T({2, 3}), arg(0, "x"));
  Value* w = g.add_input(T({3, 4}), cap(0, "fc.weight"));
  Value* r = g.add_node(op("relu"), {x}, {}, {T({2, 3})})->output();
  Value* m = g.add_node(op("matmul"), {r, w}, {}, {T({2, 4})})->output();
  Value* a = g.add_node(op("add"), {m, m}, Attrs{{"alpha", alpha}}, {T({2, 4})})->output();
  g.set_outputs({a, r});
}

TEST(Graph, PrintsOneLinePerInputAndNode) {
  Graph g;
  build_mlp(g);
  EXPECT_EQ(g.to_string(),
            "%0 : f32[2,3] = input arg0\n"
            "%1 : f32[3,4] = input fc.weight\n"
            "%2 = relu(%0) : f32[2,3]\n"
            "%3 = matmul(%2, %1) : f32[2,4]\n"
            "%4 = add(%3, %3, alpha=1) : f32[2,4]\n"
            "return (%4, %2)\n");
  EXPECT_NO_THROW(g.verify());
  EXPECT_EQ(g.num_nodes(), 3u);
  std::vector<Node*> nodes = g.nodes();
  EXPECT_EQ(nodes[1]->op().name, "matmul");
  // users: %3 is read twice by the add, %2 once by the matmul.
  EXPECT_EQ(nodes[1]->output()->users().size(), 2u);
  EXPECT_EQ(nodes[0]->output()->users().size(), 1u);
  EXPECT_TRUE(g.inputs()[0]->is_input());
  EXPECT_EQ(nodes[2]->output()->producer(), nodes[2]);
}

TEST(Graph, PrintsSymbolicSizesNoneInputsStridesAndConvAttrs) {
  sym::ShapeEnv env;
  SymInt s0 = env.create_symbol(5, sym::Source::size(0, 0), sym::DimPolicy::kDynamic);
  Graph g;
  ValueType xt = T({s0, 3, 8, 8});
  xt.strides = {192, 1, 24, 3};
  Value* x = g.add_input(xt, arg(0));
  Value* w = g.add_input(T({4, 3, 3, 3}), cap(1, "conv1.weight"));
  Node* c = g.add_node(op("conv2d"), {x, w, nullptr},
                       Attrs{{"stride", to_shape({2, 2})},
                             {"padding", to_shape({1, 1})},
                             {"dilation", to_shape({1, 1})},
                             {"groups", int64_t{1}}},
                       {T({s0, 4, 4, 4})});
  Value* y = g.add_node(op("relu"), {c->output()}, {}, {T({s0, 4, 4, 4})})->output();
  g.set_outputs({y});
  EXPECT_EQ(g.to_string(),
            "%0 : f32[s0,3,8,8]{192,1,24,3} = input arg0\n"
            "%1 : f32[4,3,3,3] = input conv1.weight\n"
            "%2 = conv2d(%0, %1, None, stride=[2,2], padding=[1,1], dilation=[1,1], groups=1) : "
            "f32[s0,4,4,4]\n"
            "%3 = relu(%2) : f32[s0,4,4,4]\n"
            "return (%3)\n");
  EXPECT_EQ(T({s0 * 2 + 1, 3}).to_string(), "f32[2*s0 + 1,3]");
  ValueType rm = T({s0, 3});
  rm.strides = {3, 1};
  EXPECT_EQ(rm.to_string(), "f32[s0,3]");  // row-major strides are not printed
  EXPECT_EQ(cap(3, "").to_string(), "capture3");
}

TEST(Graph, MultiOutputNodesPrintEveryOutput) {
  Graph g;
  Value* x = g.add_input(T({4, 2}), arg(0));
  Node* n =
      g.add_node(split2_op(), {x}, Attrs{{"tag", std::string("rows")}}, {T({2, 2}), T({2, 2})});
  g.set_outputs({n->output(1), n->output(0)});
  EXPECT_EQ(g.to_string(),
            "%0 : f32[4,2] = input arg0\n"
            "%1, %2 = test.split2(%0, tag=\"rows\") : f32[2,2], f32[2,2]\n"
            "return (%2, %1)\n");
}

TEST(Graph, AddNodeRejectsForeignValuesAndWrongInputCounts) {
  Graph g, other;
  Value* x = g.add_input(T({2}), arg(0));
  Value* y = other.add_input(T({2}), arg(0));
  try {
    g.add_node(op("add"), {x, y}, Attrs{{"alpha", 1.0}}, {T({2})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[ir.graph] add_node(add): input 1 (%0) is not a value of this graph");
  }
  EXPECT_THROW(g.add_node(op("relu"), {x, x}, {}, {T({2})}), Error);
  EXPECT_THROW(g.set_outputs({y}), Error);
  EXPECT_EQ(g.num_nodes(), 0u);
  EXPECT_TRUE(x->users().empty());
}

TEST(Graph, ReplaceAllUsesMovesNodeInputsAndGraphOutputs) {
  Graph g;
  Value* x = g.add_input(T({3}), arg(0));
  Value* a = g.add_node(op("relu"), {x}, {}, {T({3})})->output();
  Value* b = g.add_node(op("relu"), {x}, {}, {T({3})})->output();
  Node* sum = g.add_node(op("add"), {b, b}, Attrs{{"alpha", 1.0}}, {T({3})});
  g.set_outputs({sum->output(), b});
  g.replace_all_uses(b, a);
  EXPECT_EQ(sum->inputs()[0], a);
  EXPECT_EQ(sum->inputs()[1], a);
  EXPECT_EQ(g.outputs()[1], a);
  EXPECT_TRUE(b->users().empty());
  EXPECT_EQ(a->users().size(), 2u);
  EXPECT_NO_THROW(g.verify());
}

TEST(Graph, RemoveNodesIfDropsUnusedNodesAndRefusesUsedOnes) {
  Graph g;
  Value* x = g.add_input(T({3}), arg(0));
  Value* a = g.add_node(op("relu"), {x}, {}, {T({3})})->output();
  Value* b = g.add_node(op("neg"), {a}, {}, {T({3})})->output();
  Value* c = g.add_node(op("exp"), {x}, {}, {T({3})})->output();
  g.set_outputs({c});
  (void)b;
  // relu is used by neg, which stays: refused, nothing changes.
  try {
    g.remove_nodes_if([](const Node& n) { return n.op().name == "relu"; });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[ir.graph] cannot remove node %1 (relu): its output %1 is used by node %2 (neg)");
  }
  EXPECT_EQ(g.num_nodes(), 3u);
  EXPECT_THROW(g.remove_nodes_if([](const Node& n) { return n.op().name == "exp"; }), Error);
  g.remove_nodes_if([](const Node& n) { return n.op().name != "exp"; });
  EXPECT_EQ(g.num_nodes(), 1u);
  EXPECT_EQ(x->users().size(), 1u);
  EXPECT_EQ(g.to_string(),
            "%0 : f32[3] = input arg0\n"
            "%3 = exp(%0) : f32[3]\n"
            "return (%3)\n");
  EXPECT_NO_THROW(g.verify());
}

TEST(StructuralHash, EqualForGraphsBuiltTwice) {
  Graph a, b;
  build_mlp(a);
  build_mlp(b);
  EXPECT_EQ(a.structural_hash(), b.structural_hash());
  EXPECT_TRUE(a.structurally_equal(b));
  EXPECT_TRUE(b.structurally_equal(a));
}

TEST(ValueType, RecordsRequiresGrad) {
  Tensor w = empty({3, 4}, DType::f32);
  EXPECT_FALSE(ValueType::of(w).requires_grad);
  EXPECT_EQ(ValueType::of(w).to_string(), "f32[3,4]");
  w.set_requires_grad(true);
  ValueType t = ValueType::of(w);
  EXPECT_TRUE(t.requires_grad);
  EXPECT_EQ(t.to_string(), "f32[3,4] requires_grad");

  // Part of the structure: graphs differing only in it hash and compare apart.
  auto build = [&](Graph& g, bool grad) {
    ValueType wt = T({3, 4});
    wt.requires_grad = grad;
    Value* x = g.add_input(T({2, 3}), arg(0, "x"));
    Value* wv = g.add_input(wt, cap(0, "fc.weight"));
    g.set_outputs({g.add_node(op("matmul"), {x, wv}, {}, {T({2, 4})})->output()});
  };
  Graph a, b, c;
  build(a, true);
  build(b, false);
  build(c, true);
  EXPECT_NE(a.structural_hash(), b.structural_hash());
  EXPECT_FALSE(a.structurally_equal(b));
  EXPECT_EQ(a.structural_hash(), c.structural_hash());
  EXPECT_TRUE(a.structurally_equal(c));
  EXPECT_NE(a.to_string().find("%1 : f32[3,4] requires_grad = input fc.weight"), std::string::npos)
      << a.to_string();
}

TEST(StructuralHash, IndependentOfValueIdsAndSourceNames) {
  // Same program, but the second graph made (and dropped) an extra node first, so ids differ,
  // and its inputs have other names.
  Graph a, b;
  build_mlp(a);
  Value* x = b.add_input(T({2, 3}), arg(0, "input"));
  Value* w = b.add_input(T({3, 4}), cap(0, "model.fc.weight"));
  b.add_node(op("neg"), {x}, {}, {T({2, 3})});
  b.remove_nodes_if([](const Node&) { return true; });
  Value* r = b.add_node(op("relu"), {x}, {}, {T({2, 3})})->output();
  Value* m = b.add_node(op("matmul"), {r, w}, {}, {T({2, 4})})->output();
  Value* s = b.add_node(op("add"), {m, m}, Attrs{{"alpha", 1.0}}, {T({2, 4})})->output();
  b.set_outputs({s, r});
  EXPECT_NE(a.to_string(), b.to_string());
  EXPECT_EQ(a.structural_hash(), b.structural_hash());
  EXPECT_TRUE(a.structurally_equal(b));
}

TEST(StructuralHash, DiffersWhenAnAttrShapeOpWiringOrSourceDiffers) {
  Graph base;
  build_mlp(base);
  auto differs = [&](const Graph& g) {
    EXPECT_NE(base.structural_hash(), g.structural_hash()) << g.to_string();
    EXPECT_FALSE(base.structurally_equal(g)) << g.to_string();
  };
  {  // attribute value
    Graph g;
    build_mlp(g, 2.0);
    differs(g);
  }
  {  // attribute type: int 1 instead of double 1.0
    Graph g;
    Value* x = g.add_input(T({2, 3}), arg(0));
    Value* w = g.add_input(T({3, 4}), cap(0, "fc.weight"));
    Value* r = g.add_node(op("relu"), {x}, {}, {T({2, 3})})->output();
    Value* m = g.add_node(op("matmul"), {r, w}, {}, {T({2, 4})})->output();
    Value* a = g.add_node(op("add"), {m, m}, Attrs{{"alpha", int64_t{1}}}, {T({2, 4})})->output();
    g.set_outputs({a, r});
    differs(g);
  }
  {  // input shape
    Graph g;
    Value* x = g.add_input(T({5, 3}), arg(0));
    Value* w = g.add_input(T({3, 4}), cap(0, "fc.weight"));
    Value* r = g.add_node(op("relu"), {x}, {}, {T({5, 3})})->output();
    Value* m = g.add_node(op("matmul"), {r, w}, {}, {T({5, 4})})->output();
    Value* a = g.add_node(op("add"), {m, m}, Attrs{{"alpha", 1.0}}, {T({5, 4})})->output();
    g.set_outputs({a, r});
    differs(g);
  }
  {  // op
    Graph g;
    Value* x = g.add_input(T({2, 3}), arg(0));
    Value* w = g.add_input(T({3, 4}), cap(0, "fc.weight"));
    Value* r = g.add_node(op("sigmoid"), {x}, {}, {T({2, 3})})->output();
    Value* m = g.add_node(op("matmul"), {r, w}, {}, {T({2, 4})})->output();
    Value* a = g.add_node(op("add"), {m, m}, Attrs{{"alpha", 1.0}}, {T({2, 4})})->output();
    g.set_outputs({a, r});
    differs(g);
  }
  {  // wiring: add(%3, %2') reading relu output instead (same types would not fit: use outputs)
    Graph g;
    Value* x = g.add_input(T({2, 3}), arg(0));
    Value* w = g.add_input(T({3, 4}), cap(0, "fc.weight"));
    Value* r = g.add_node(op("relu"), {x}, {}, {T({2, 3})})->output();
    Value* m = g.add_node(op("matmul"), {r, w}, {}, {T({2, 4})})->output();
    Value* a = g.add_node(op("add"), {m, m}, Attrs{{"alpha", 1.0}}, {T({2, 4})})->output();
    g.set_outputs({a, m});
    differs(g);
  }
  {  // source kind: the weight as an argument
    Graph g;
    Value* x = g.add_input(T({2, 3}), arg(0));
    Value* w = g.add_input(T({3, 4}), arg(1));
    Value* r = g.add_node(op("relu"), {x}, {}, {T({2, 3})})->output();
    Value* m = g.add_node(op("matmul"), {r, w}, {}, {T({2, 4})})->output();
    Value* a = g.add_node(op("add"), {m, m}, Attrs{{"alpha", 1.0}}, {T({2, 4})})->output();
    g.set_outputs({a, r});
    differs(g);
  }
}

TEST(StructuralHash, SymbolicSizesCompareByStructureAcrossShapeEnvs) {
  auto build = [](Graph& g, sym::ShapeEnv& env, int64_t view_mult) {
    SymInt s0 = env.create_symbol(4, sym::Source::size(0, 0), sym::DimPolicy::kDynamic);
    Value* x = g.add_input(T({s0, 6}), arg(0));
    Value* v = g.add_node(op("view"), {x}, Attrs{{"size", Shape{s0 * view_mult, 6 / view_mult}}},
                          {T({s0 * view_mult, 6 / view_mult})})
                   ->output();
    g.set_outputs({v});
  };
  sym::ShapeEnv e1, e2, e3;
  Graph a, b, c;
  build(a, e1, 2);
  build(b, e2, 2);
  build(c, e3, 3);
  EXPECT_EQ(a.structural_hash(), b.structural_hash());
  EXPECT_TRUE(a.structurally_equal(b));
  EXPECT_NE(a.structural_hash(), c.structural_hash());
  EXPECT_FALSE(a.structurally_equal(c));
  EXPECT_EQ(e1.guards().size(), 0u);  // hashing and comparing never guard
}

TEST(StructuralHash, ForcedCollisionStillComparesUnequal) {
  // A cache keyed on a hash truncated to 6 bits collides quickly; structurally_equal must tell
  // the colliding graphs apart (the lazy device's cache relies on it).
  std::map<uint64_t, std::unique_ptr<Graph>> by_hash;
  int collisions = 0;
  for (int i = 0; i < 200 && collisions < 5; ++i) {
    auto g = std::make_unique<Graph>();
    build_mlp(*g, 1.0 + i);
    uint64_t key = g->structural_hash() & 63;
    auto [it, inserted] = by_hash.emplace(key, nullptr);
    if (inserted) {
      it->second = std::move(g);
      continue;
    }
    ++collisions;
    EXPECT_FALSE(it->second->structurally_equal(*g));
    EXPECT_NE(it->second->structural_hash(), g->structural_hash());
  }
  EXPECT_EQ(collisions, 5);
}

}  // namespace
}  // namespace lathe::ir
