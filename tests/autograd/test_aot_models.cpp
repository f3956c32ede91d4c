// AOT autograd on zoo models at a small size: one compiled training step (forward, loss,
// backward) of resnet18 (BatchNorm in train mode) and bert (dropout on, same seed) gives eager's
// loss, parameter gradients and updated BatchNorm statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lathe/core/random.h"
#include "lathe/ops/ops.h"
#include "lathe/trace/compile.h"
#include "tests/models/small_models.h"

using namespace lathe;
using V = std::vector<Tensor>;

namespace {

// |got - want| <= rtol * max|want| + atol per tensor (gradients span many magnitudes; some are
// rounding noise around an exact zero, such as the key biases' under softmax).
void expect_close_scaled(const Tensor& got, const Tensor& want, double rtol,
                         const std::string& what, double atol = 1e-6) {
  ASSERT_EQ(got.defined(), want.defined()) << what;
  if (!want.defined()) return;  // no gradient reaches it (bert's pooler here), in both
  ASSERT_EQ(got.shape(), want.shape()) << what;
  auto g = got.to(DType::f64).to_vector<double>();
  auto w = want.to(DType::f64).to_vector<double>();
  double scale = 1e-30;
  for (double v : w) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::abs(g[i] - w[i]), rtol * scale + atol)
        << what << " element " << i << ": " << g[i] << " vs " << w[i] << " (max " << scale << ")";
}

// The loss of a model's outputs: cross-entropy of the logits (CNNs) or of the last hidden
// states against random token classes (bert).
Tensor model_loss(const V& outs, const Tensor& labels) {
  Tensor logits = outs[0];
  if (logits.dim() == 3) logits = logits.reshape({-1, logits.sizes()[2]});
  return cross_entropy(logits, labels);
}

void compare_one_step(const std::string& name, const V& inputs, const Tensor& labels, double rtol) {
  SCOPED_TRACE(name);
  auto eager = test_models::small_model(name, 7);
  auto compiled = test_models::small_model(name, 7);
  for (auto* m : {eager.get(), compiled.get()}) {
    m->module->train();
    for (Tensor& p : m->module->parameters()) p.set_requires_grad(true);
  }
  nn::Module* cm = compiled->module.get();
  auto f =
      lathe::compile([cm, labels](const V& a) { return model_loss(cm->forward_all(a), labels); });
  manual_seed(99);
  Tensor le = model_loss(eager->forward(inputs), labels);
  le.backward();
  manual_seed(99);
  Tensor lc = f(inputs)[0];
  lc.backward();
  ASSERT_EQ(lc.grad_fn_name(), "compiled_backward");
  expect_close_scaled(lc, le, rtol, "loss");
  const auto pe = eager->module->named_parameters(), pc = compiled->module->named_parameters();
  ASSERT_EQ(pe.size(), pc.size());
  for (size_t i = 0; i < pe.size(); ++i)
    expect_close_scaled(pc[i].second.grad(), pe[i].second.grad(), rtol, "grad of " + pe[i].first);
  const auto se = eager->module->state_dict(), sc = compiled->module->state_dict();
  for (const auto& [k, v] : se)
    if (is_floating(v.dtype())) expect_close_scaled(sc.at(k), v, rtol, "state " + k);
}

}  // namespace

TEST(AotAutogradModels, Resnet18TrainStep) {
  models::InputOptions io;
  io.image_size = 16;  // the eager conv backward is the slow part
  V inputs = models::default_inputs("resnet18", 2, 3, io);
  Generator gen(4);
  Tensor labels = randint(0, 10, {2}, DType::i64, &gen);
  compare_one_step("resnet18", inputs, labels, 1e-4);
}

TEST(AotAutogradModels, BertTrainStepWithDropout) {
  models::InputOptions io;
  io.seq_len = 8;
  io.bert = test_models::small_bert();
  V inputs = models::default_inputs("bert", 2, 3, io);
  Generator gen(5);
  Tensor labels = randint(0, io.bert->hidden_size, {16}, DType::i64, &gen);
  compare_one_step("bert", inputs, labels, 1e-4);
}
