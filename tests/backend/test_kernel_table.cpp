// The cpu backend's kernel table: what it knows about lowering each op, apart from the OpDef.
#include <gtest/gtest.h>

#include "lathe/backend/cpu/kernel_table.h"

namespace lathe::backend::cpu {
namespace {

const OpDef& op(const char* name) { return OpRegistry::global().get(name); }
const CpuKernelInfo& info(const char* name) {
  const CpuKernelInfo* k = cpu_kernel(&op(name));
  EXPECT_NE(k, nullptr) << name;
  return *k;
}

TEST(CpuKernelTable, PostOpForms) {
  auto post = [](const char* name, const Attrs& a) { return info(name).post_op(a); };
  EXPECT_EQ(post("relu", {})->kind, PostOp::Kind::relu);
  auto clip = post("hardtanh", Attrs{{"min_val", 0.0}, {"max_val", 6.0}});
  ASSERT_TRUE(clip.has_value());
  EXPECT_EQ(clip->kind, PostOp::Kind::clip);
  EXPECT_EQ(clip->hi, 6.0);
  EXPECT_EQ(post("gelu", Attrs{{"approximate", std::string("tanh")}})->kind,
            PostOp::Kind::gelu_tanh);
  EXPECT_EQ(post("gelu", Attrs{{"approximate", std::string("none")}})->kind,
            PostOp::Kind::gelu_erf);
  EXPECT_FALSE(info("sigmoid").post_op);
}

TEST(CpuKernelTable, OutKernelsAndInPlaceInputs) {
  for (const char* name : {"add", "relu", "where", "cat", "softmax", "layer_norm", "conv2d",
                           "linear", "matmul", "max_pool2d", "conv2d_fused", "pointwise_fused"})
    EXPECT_TRUE(info(name).out_kernel) << name;
  EXPECT_EQ(info("softmax").in_place_input, 0);
  EXPECT_EQ(info("conv2d_fused").in_place_input, 7);
  EXPECT_EQ(info("linear_fused").in_place_input, 3);
  EXPECT_EQ(info("add").in_place_input, -1);
  // Ops the backend runs through their eager kernel only have no entry.
  EXPECT_EQ(cpu_kernel(&op("batch_norm")), nullptr);
}

TEST(CpuKernelTable, PointwiseInstructions) {
  auto in = info("add").pointwise_instr(Attrs{{"alpha", 2.0}});
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->op, kernels::PwOp::add);
  EXPECT_EQ(in->c0, 2.0);
  EXPECT_FALSE(info("log").pointwise_instr);
}

}  // namespace
}  // namespace lathe::backend::cpu
