// Attrs: copies share one list of items (the lazy device and graph nodes keep a copy of every
// call's attributes for the cost of a counter increment), and set() copies a shared list first,
// so no copy ever sees another's change. Also the layout rule's dim order for tied strides.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "lathe/ops/attrs.h"
#include "lathe/ops/shape_util.h"

namespace lathe {
namespace {

struct Parsed final : ParsedAttrs {};

TEST(Attrs, CopiesShareItemsUntilOneIsSet) {
  Attrs a{{"stride", Shape{2, 2}}, {"groups", int64_t{4}}, {"act", std::string("relu")}};
  Attrs b = a;
  EXPECT_TRUE(b.shares_items_with(a));
  EXPECT_EQ(b.items().data(), a.items().data());  // no value was copied

  b.set("groups", int64_t{8});  // copy on write: a keeps its value
  EXPECT_FALSE(b.shares_items_with(a));
  EXPECT_EQ(a.get_int("groups"), 4);
  EXPECT_EQ(b.get_int("groups"), 8);
  EXPECT_EQ(b.get_ints("stride"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(b.get_string("act"), "relu");

  Attrs c = a;
  c.set("eps", 1e-5);  // a new name on a shared list
  EXPECT_FALSE(a.has("eps"));
  EXPECT_DOUBLE_EQ(c.get_double("eps"), 1e-5);
  EXPECT_EQ(a.to_string(), "stride=[2,2], groups=4, act=\"relu\"");
  EXPECT_EQ(c.to_string(), "stride=[2,2], groups=4, act=\"relu\", eps=1e-05");
}

TEST(Attrs, SetKeepsOrderAndReplacesInPlace) {
  Attrs a;
  EXPECT_TRUE(a.items().empty());
  for (int i = 0; i < 9; ++i) a.set(i % 2 ? "odd" : "even", int64_t{i});  // grows, replaces
  a.set("z", true).set("y", DType::f64).set("x", Shape{1, 2, 3});
  ASSERT_EQ(a.items().size(), 5u);
  EXPECT_STREQ(a.items()[0].first, "even");
  EXPECT_STREQ(a.items()[1].first, "odd");
  EXPECT_STREQ(a.items()[4].first, "x");
  EXPECT_EQ(a.get_int("even"), 8);
  EXPECT_EQ(a.get_int("odd"), 7);
  EXPECT_EQ(a.get_dtype("y"), DType::f64);
}

TEST(Attrs, AssignmentAndMoveKeepEachCopyIndependent) {
  Attrs a{{"alpha", 2.0}};
  Attrs b{{"beta", int64_t{3}}};
  b = a;
  EXPECT_TRUE(b.shares_items_with(a));
  a = Attrs{};  // dropping one owner leaves the other's items alive
  EXPECT_TRUE(a.items().empty());
  EXPECT_DOUBLE_EQ(b.get_double("alpha"), 2.0);
  Attrs c = std::move(b);
  EXPECT_TRUE(b.items().empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_DOUBLE_EQ(c.get_double("alpha"), 2.0);
  c = c;  // self-assignment keeps the items
  EXPECT_DOUBLE_EQ(c.get_double("alpha"), 2.0);
}

TEST(Attrs, ParsedFormIsPerCopyAndDroppedBySet) {
  Attrs a{{"groups", int64_t{1}}};
  a.set_parsed(std::make_shared<Parsed>());
  Attrs b = a;
  EXPECT_NE(b.parsed<Parsed>(), nullptr);  // copies share it
  b.set("groups", int64_t{2});
  EXPECT_FALSE(b.has_parsed());
  EXPECT_NE(a.parsed<Parsed>(), nullptr);  // the other copy keeps it
  EXPECT_EQ(a.get_int("groups"), 1);
}

TEST(Attrs, CopiesOnManyThreads) {
  // Copies made and dropped on several threads at once: the count stays right (run under a
  // sanitizer this also checks there is no race), and every copy reads the same values.
  const Attrs a{{"stride", Shape{1, 2, 3}}, {"name", std::string(40, 'x')}};
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        Attrs c = a;
        if (i % 100 == 0) c.set("i", int64_t{i});
        ok[t] += c.get_shape("stride").size() == 3 && c.get_string("name").size() == 40;
      }
    });
  for (auto& th : threads) th.join();
  for (int v : ok) EXPECT_EQ(v, 20000);
  EXPECT_FALSE(a.has("i"));
}

TEST(LayoutRule, TiedStridesKeepTheEarlierDimInside) {
  // Outputs take the dim order of a same-sized input (eager's layout rule, which the lazy device
  // and the tracer also ask); among tied strides (size-1 dims) the earlier dim stays inside.
  Shape sizes{2, 3, 4, 5};
  Shape cl{60, 1, 15, 3};  // channels last
  EXPECT_EQ(strides_like(sizes, sizes, cl), (Shape{60, 1, 15, 3}));
  Shape cf{60, 20, 5, 1};  // row major
  EXPECT_EQ(strides_like(sizes, sizes, cf), (Shape{60, 20, 5, 1}));
  // Ties among size-1 dims: [2,1,1,3] with strides [3,3,3,1] is row-major.
  EXPECT_EQ(strides_like(Shape{2, 1, 1, 3}, Shape{2, 1, 1, 3}, Shape{3, 3, 3, 1}),
            (Shape{3, 3, 3, 1}));
  // A dense permutation with a size-1 dim tied to another: [4,1,2] strides [1,1,4] (dim 0 and 1
  // tie at stride 1, dim 0 first): the result keeps that order.
  EXPECT_EQ(strides_like(Shape{4, 1, 2}, Shape{4, 1, 2}, Shape{1, 1, 4}), (Shape{1, 4, 4}));
  // Not dense: row-major.
  EXPECT_EQ(strides_like(Shape{2, 3}, Shape{2, 3}, Shape{1, 4}), (Shape{3, 1}));
}

}  // namespace
}  // namespace lathe
