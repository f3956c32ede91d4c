// Tensor's view, copy and autograd members are defined in core (core/tensor_methods.cpp) and run
// the op lathe_ops registers for each (core/tensor_methods.h): a dispatch mode sees every one of
// them as an op, and without the registration a call is an error naming the member.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lathe/core/dispatch_mode.h"
#include "lathe/core/tensor.h"
#include "lathe/core/tensor_methods.h"
#include "lathe/ops/op_def.h"

using namespace lathe;

namespace {

// Runs each op eagerly and notes its name.
class OpNameLog : public DispatchMode {
 public:
  std::vector<std::string> names;
  std::vector<Tensor> dispatch(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                               std::vector<TensorMeta>&& metas) override {
    names.push_back(op.name);
    ModeGuard eager(nullptr);
    return op.kernel(inputs, attrs, metas);
  }
};

Tensor numbered(const Shape& sizes) {
  std::vector<float> v;
  for (int i = 0; i < 24; ++i) v.push_back(static_cast<float>(i * 3 % 7) - 2.5f);
  return from_vector(v, {24}).view(sizes);
}

}  // namespace

TEST(TensorMethods, MembersDispatchTheirOps) {
  Tensor x = numbered({2, 3, 4});
  OpNameLog log;
  Tensor t, f, n, c, d;
  {
    ModeGuard guard(&log);
    t = x.transpose(0, 2);   // metadata in core, then permute
    f = x.flatten(1);        // the flattened size in core, then reshape
    n = x.narrow(2, -3, 2);  // bounds checked in core, then slice
    c = t.contiguous();
    d = x.to(DType::f64);
  }
  EXPECT_EQ(log.names, (std::vector<std::string>{"permute", "reshape", "slice", "clone", "clone"}));
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(t.int_strides(), (std::vector<int64_t>{1, 4, 12}));
  EXPECT_EQ(f.shape(), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(n.shape(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(n.storage_offset(), 1);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.to_vector<float>(), t.to_vector<float>());
  EXPECT_EQ(d.dtype(), DType::f64);
  EXPECT_EQ(d.to_vector<double>()[5], static_cast<double>(x.to_vector<float>()[5]));
  // The shortcuts stay in core: no op runs for an already contiguous tensor or the same dtype.
  log.names.clear();
  {
    ModeGuard guard(&log);
    EXPECT_TRUE(x.contiguous().is_same(x));
    EXPECT_TRUE(x.to(DType::f32).is_same(x));
  }
  EXPECT_TRUE(log.names.empty());
}

TEST(TensorMethods, WithoutTheOpsLayerAMemberNamesWhatIsMissing) {
  const detail::TensorOpFunctions* ops = &detail::tensor_op_functions("test");
  Tensor x = numbered({4, 6});
  detail::register_tensor_op_functions(nullptr);
  std::string message;
  try {
    x.reshape({6, 4});
  } catch (const Error& e) {
    message = e.what();
  }
  detail::register_tensor_op_functions(ops);
  EXPECT_NE(message.find("[reshape]"), std::string::npos) << message;
  EXPECT_NE(message.find("link lathe_ops"), std::string::npos) << message;
  EXPECT_EQ(x.reshape({6, 4}).shape(), (std::vector<int64_t>{6, 4}));
}

// to(dt) and contiguous() may return the tensor itself (writing through the result writes the
// caller's data); to_owned(dt) is always a fresh contiguous buffer with the same values.
TEST(TensorMethods, ToOwnedNeverAliases) {
  Tensor w = arange(0.0, 24.0, 1.0, DType::f64).view({2, 3, 4});
  EXPECT_TRUE(w.to(DType::f64).contiguous().is_same(w));  // the footgun to_owned avoids
  const Tensor cases[] = {w, w.transpose(0, 2), w.slice(2, 0, 4, 2)};
  for (const Tensor& t : cases) {
    for (DType dt : {DType::f64, DType::f32}) {
      SCOPED_TRACE(t.shape_string() + " to " + dtype_name(dt));
      Tensor o = t.to_owned(dt);
      EXPECT_EQ(o.dtype(), dt);
      EXPECT_TRUE(o.is_contiguous());
      EXPECT_NE(o.impl().storage, t.impl().storage);
      EXPECT_EQ(o.to_vector<double>(), t.to_vector<double>());
      o.fill_(-1.0);
      EXPECT_EQ(w.to_vector<double>()[5], 5.0);  // the source is untouched
    }
  }
}
