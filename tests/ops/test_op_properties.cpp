// Op properties (OpDef): every built-in op declares its category and attribute schema; the
// schema is enforced when a node enters a graph and by the verifier; the facts passes read
// (aliasing, conditional writes, post-op forms, functional variants) are what they claim.
#include <gtest/gtest.h>

#include <string>

#include "lathe/ir/graph.h"
#include "lathe/ir/passes.h"
#include "lathe/ops/op_def.h"
#include "lathe/ops/ops.h"

namespace lathe {
namespace {

const OpDef& op(const char* name) { return OpRegistry::global().get(name); }

ir::ValueType T(Shape sizes, DType dt = DType::f32) { return {dt, Device::cpu(), sizes, {}}; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OpProperties, EveryRegisteredOpHasACategoryAndASchema) {
  const std::vector<std::string> names = OpRegistry::global().names();
  EXPECT_GT(names.size(), 60u);
  for (const std::string& name : names) {
    const OpDef& d = op(name.c_str());
    EXPECT_NE(d.category, OpCategory::unknown) << name << " has no category";
    EXPECT_TRUE(d.attr_schema.has_value()) << name << " has no attribute schema";
    // Facts agree with each other.
    if (d.category == OpCategory::view) {
      EXPECT_EQ(d.output_aliases, std::vector<int>{0}) << name;
      EXPECT_TRUE(d.mutated_inputs.empty()) << name;
    }
    if (d.category == OpCategory::in_place) {
      EXPECT_FALSE(d.mutated_inputs.empty()) << name;
      EXPECT_EQ(d.output_aliases, std::vector<int>{0}) << name;
    }
    if (!d.mutated_inputs.empty()) {
      ASSERT_NE(d.functional_variant, nullptr) << name << " writes but has no functional variant";
      const OpDef* f = OpRegistry::global().find(d.functional_variant);
      ASSERT_NE(f, nullptr) << name << ": functional variant " << d.functional_variant;
      EXPECT_TRUE(f->mutated_inputs.empty()) << d.functional_variant << " writes";
      EXPECT_EQ(f->num_inputs, d.num_inputs) << name;
    }
  }
}

TEST(OpProperties, CategoriesOfRepresentativeOps) {
  EXPECT_EQ(op("add").category, OpCategory::pointwise);
  EXPECT_EQ(op("relu").category, OpCategory::pointwise);
  EXPECT_EQ(op("sum").category, OpCategory::reduction);
  EXPECT_EQ(op("slice").category, OpCategory::view);
  EXPECT_EQ(op("add_").category, OpCategory::in_place);
  EXPECT_EQ(op("dropout").category, OpCategory::random);
  EXPECT_EQ(op("clone").category, OpCategory::copy);
  EXPECT_EQ(op("batch_norm").category, OpCategory::normalization);
  EXPECT_EQ(op("conv2d").category, OpCategory::contraction);
  EXPECT_EQ(op("max_pool2d").category, OpCategory::pooling);
  EXPECT_EQ(op("conv2d_fused").category, OpCategory::fused);
  EXPECT_STREQ(category_name(OpCategory::contraction), "contraction");
}

TEST(OpProperties, RandomOpsComeFromTheCategory) {
  for (const std::string& name : OpRegistry::global().names())
    EXPECT_EQ(ir::is_random_op(op(name.c_str())), name == "dropout") << name;
}

TEST(OpProperties, BatchNormWritesItsRunningStatsOnlyWhenTraining) {
  const OpDef& bn = op("batch_norm");
  Attrs train{{"training", true}, {"momentum", 0.1}, {"eps", 1e-5}};
  Attrs eval{{"training", false}, {"momentum", 0.1}, {"eps", 1e-5}};
  EXPECT_TRUE(bn.mutates(train, 1));
  EXPECT_TRUE(bn.mutates(train, 2));
  EXPECT_FALSE(bn.mutates(train, 0));
  EXPECT_FALSE(bn.mutates(eval, 1));
  EXPECT_FALSE(bn.mutates_any(eval));
  EXPECT_TRUE(op("add_").mutates(Attrs{{"alpha", 1.0}}, 0));
  EXPECT_FALSE(op("add").mutates_any(Attrs{}));

  // As graph nodes: only the training one (with running stats) has side effects.
  ir::Graph g;
  ir::Value* x = g.add_input(T({4, 3}), {});
  ir::Value* rm = g.add_input(T({3}), {ir::InputSource::Kind::argument, 1, ""});
  ir::Value* rv = g.add_input(T({3}), {ir::InputSource::Kind::argument, 2, ""});
  ir::Node* e = g.add_node(bn, {x, rm, rv, nullptr, nullptr}, eval, {T({4, 3})});
  ir::Node* t = g.add_node(bn, {x, rm, rv, nullptr, nullptr}, train, {T({4, 3})});
  ir::Node* no_stats = g.add_node(bn, {x, nullptr, nullptr, nullptr, nullptr}, train, {T({4, 3})});
  EXPECT_FALSE(e->has_side_effects());
  EXPECT_TRUE(t->has_side_effects());
  EXPECT_TRUE(t->mutates_input(1));
  EXPECT_FALSE(no_stats->has_side_effects());
  g.set_outputs({x});
  // DCE keeps the write, drops the unused inference batch norms.
  EXPECT_EQ(ir::dead_code_elimination(g), 2);
  ASSERT_EQ(g.num_nodes(), 1u);
  EXPECT_EQ(g.nodes()[0], t);
}

TEST(OpProperties, AliasFacts) {
  EXPECT_EQ(op("permute").aliased_input(0), 0);
  EXPECT_EQ(op("copy_").aliased_input(0), 0);
  EXPECT_EQ(op("relu").aliased_input(0), -1);
  EXPECT_EQ(op("batch_norm").aliased_input(0), -1);
}

TEST(OpProperties, PostOpNames) { EXPECT_STREQ(post_op_name(PostOp::Kind::gelu_erf), "gelu"); }

TEST(OpSchema, AcceptsWhatTheFreeFunctionsPass) {
  EXPECT_EQ(op("conv2d").attr_error(Attrs{{"stride", Shape{1, 1}},
                                          {"padding", Shape{0, 0}},
                                          {"dilation", Shape{1, 1}},
                                          {"groups", int64_t{1}}}),
            "");
  // A real attribute takes an int too; optional attributes may be left out.
  EXPECT_EQ(op("add").attr_error(Attrs{{"alpha", int64_t{2}}}), "");
  EXPECT_EQ(op("add").attr_error(Attrs{}), "");
  // A slice bound is an int or a one-element size list (a symbolic bound).
  EXPECT_EQ(
      op("slice").attr_error(Attrs{
          {"dim", int64_t{0}}, {"start", Shape{1}}, {"end", int64_t{3}}, {"step", int64_t{1}}}),
      "");
}

TEST(OpSchema, AddNodeRejectsAWrongType) {
  ir::Graph g;
  ir::Value* x = g.add_input(T({1, 3, 8, 8}), {});
  ir::Value* w = g.add_input(T({4, 3, 3, 3}), {ir::InputSource::Kind::argument, 1, ""});
  Attrs bad{
      {"stride", 2.0}, {"padding", Shape{0, 0}}, {"dilation", Shape{1, 1}}, {"groups", int64_t{1}}};
  EXPECT_EQ(error_of([&] {
              g.add_node(op("conv2d"), {x, w, nullptr}, bad, {T({1, 4, 3, 3})});
            }),
            "[ir.graph] conv2d: attribute 'stride' must be an int list, got float");
  EXPECT_EQ(g.num_nodes(), 0u);
}

TEST(OpSchema, AddNodeRejectsMissingAndUnknownAttributes) {
  ir::Graph g;
  ir::Value* x = g.add_input(T({2, 3}), {});
  std::string missing = error_of([&] {
    g.add_node(op("hardtanh"), {x}, Attrs{{"min_val", 0.0}}, {T({2, 3})});
  });
  EXPECT_NE(missing.find("[ir.graph] hardtanh: missing attribute 'max_val'"), std::string::npos)
      << missing;
  std::string unknown = error_of([&] {
    g.add_node(op("relu"), {x}, Attrs{{"inplace", true}}, {T({2, 3})});
  });
  EXPECT_NE(unknown.find("[ir.graph] relu: unknown attribute 'inplace'"), std::string::npos)
      << unknown;
  std::string wrong = error_of([&] {
    g.add_node(op("sum"), {x}, Attrs{{"dims", Shape{0}}, {"keepdim", int64_t{1}}}, {T({3})});
  });
  EXPECT_NE(wrong.find("attribute 'keepdim' must be a bool, got int"), std::string::npos) << wrong;
}

TEST(OpSchema, VerifyRejectsAttributesChangedAfterTheFact) {
  ir::Graph g;
  ir::Value* x = g.add_input(T({2, 3}), {});
  ir::Node* n = g.add_node(op("softmax"), {x}, Attrs{{"dim", int64_t{1}}}, {T({2, 3})});
  g.set_outputs({n->output()});
  g.verify();
  n->mutable_attrs().set("dim", std::string("last"));
  std::string err = error_of([&] { g.verify(); });
  EXPECT_NE(err.find("[ir.verify] node %1 (softmax): attribute 'dim' must be an int, got string"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace lathe
