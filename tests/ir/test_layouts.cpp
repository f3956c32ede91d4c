// Fixed and flexible layouts (ir::Layout): the Graph decides them from its structure.
#include <gtest/gtest.h>

#include "ir_test_util.h"

namespace lathe::ir {
namespace {

using namespace testing;

TEST(Layouts, InputsOutputsViewsAndWritesAreFixedTheRestFlexible) {
  Graph g;
  Value* x = g.add_input(T({2, 3}), arg(0, "x"));
  Value* r = g.add_node(op("relu"), {x}, {}, {T({2, 3})})->output();      // read only by a view
  Value* v = g.add_node(op("unsqueeze"), {r}, Attrs{{"dim", int64_t{0}}}, {T({1, 2, 3})})->output();
  Value* n = g.add_node(op("neg"), {x}, {}, {T({2, 3})})->output();       // written in place
  Value* w = g.add_node(op("relu_"), {n}, {}, {T({2, 3})})->output();
  Value* t = g.add_node(op("tanh"), {x}, {}, {T({2, 3})})->output();      // only read
  Value* s = g.add_node(op("add"), {t, w}, Attrs{{"alpha", 1.0}}, {T({2, 3})})->output();
  g.set_outputs({v, s});
  EXPECT_TRUE(x->type().fixed_layout());   // the caller's tensor
  EXPECT_TRUE(r->type().fixed_layout());   // seen through the view
  EXPECT_TRUE(v->type().fixed_layout());   // a view (and an output)
  EXPECT_TRUE(n->type().fixed_layout());   // written in place
  EXPECT_TRUE(w->type().fixed_layout());   // the written value itself
  EXPECT_FALSE(t->type().fixed_layout());  // the backend may lay it out as it likes
  EXPECT_TRUE(s->type().fixed_layout());   // an output
}

TEST(Layouts, DecidedByTheGraphNotCopiedWithTheType) {
  // A type copied from a fixed value (a pass rebuilding a graph) starts flexible in its new place.
  Graph g;
  Value* x = g.add_input(T({4}), arg(0, "x"));
  ValueType fixed = x->type();
  ASSERT_TRUE(fixed.fixed_layout());
  Value* a = g.add_node(op("relu"), {x}, {}, {fixed})->output();
  Value* b = g.add_node(op("neg"), {a}, {}, {fixed})->output();
  g.set_outputs({b});
  EXPECT_FALSE(a->type().fixed_layout());
  EXPECT_TRUE(b->type().fixed_layout());
  // Replacing the output makes its replacement fixed.
  Value* c = g.add_node(op("tanh"), {a}, {}, {T({4})})->output();
  EXPECT_FALSE(c->type().fixed_layout());
  g.replace_all_uses(b, c);
  EXPECT_TRUE(c->type().fixed_layout());
  EXPECT_EQ(a->type().to_string(), fixed.to_string());  // printing shows what it holds
}

}  // namespace
}  // namespace lathe::ir
