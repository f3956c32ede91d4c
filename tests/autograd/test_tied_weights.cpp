// Weight tying (issue 33): a decoder whose weight is the encoder's tensor. parameters() lists the
// tensor once (as PyTorch), so SGD with momentum moves it by lr x (its summed gradient) with one
// momentum buffer, eagerly and compiled alike; the reference is the same update written by hand
// on plain tensors, with the weight used twice in one expression.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/nn/layers.h"
#include "lathe/nn/module.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/optimizer.h"
#include "lathe/trace/compile.h"

using namespace lathe;
using V = std::vector<Tensor>;

namespace {

class TiedAutoencoder : public nn::Module {
 public:
  explicit TiedAutoencoder(uint64_t seed) {
    manual_seed(seed);
    enc = register_module("enc", nn::make<nn::Linear>(5, 5));
    dec = register_module("dec", nn::make<nn::Linear>(5, 5));
    dec->set_parameter("weight", enc->param("weight"));
    to(DType::f64);
    for (Tensor& t : parameters()) t.set_requires_grad(true);
  }
  Tensor forward(const Tensor& x) override { return dec->forward(tanh(enc->forward(x))); }
  std::shared_ptr<nn::Linear> enc, dec;
};

Tensor squared_error(const Tensor& y, const Tensor& t) {
  Tensor d = sub(y, t);
  return sum(mul(d, d));
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::abs(g[i] - w[i]), 1e-12 * (1 + std::abs(w[i])))
        << what << " element " << i << ": " << g[i] << " vs " << w[i];
}

}  // namespace

TEST(TiedWeights, SgdMomentumEagerAndCompiledMatchTheHandWrittenUpdate) {
  auto eager = std::make_shared<TiedAutoencoder>(3), comp = std::make_shared<TiedAutoencoder>(3);
  ASSERT_TRUE(eager->dec->param("weight").is_same(eager->enc->param("weight")));
  ASSERT_EQ(eager->parameters().size(), 3u);
  optim::SGDOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  optim::SGD opt_e(eager->parameters(), o), opt_c(comp->parameters(), o);
  auto f = compile([&](const V& a) { return V{squared_error(comp->forward(a[0]), a[1])}; });

  // The reference: W, b1, b2 as plain leaves, y = (tanh(x W^T + b1)) W^T + b2.
  Tensor w, b1, b2, buf_w, buf_b1, buf_b2;
  {
    NoGradGuard ng;
    w = eager->enc->param("weight").clone();
    b1 = eager->enc->param("bias").clone();
    b2 = eager->dec->param("bias").clone();
  }
  Tensor* leaves[] = {&w, &b1, &b2};
  Tensor* bufs[] = {&buf_w, &buf_b1, &buf_b2};
  for (Tensor* t : leaves) t->set_requires_grad(true);

  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    Generator gen(50 + step);
    Tensor x = randn({6, 5}, DType::f64, &gen), t = randn({6, 5}, DType::f64, &gen);
    opt_e.zero_grad();
    opt_c.zero_grad();
    Tensor le = squared_error(eager->forward(x), t);
    Tensor lc = f({x, t})[0];
    Tensor lr = squared_error(linear(tanh(linear(x, w, b1)), w, b2), t);
    expect_close(le, lr, "eager loss");
    expect_close(lc, lr, "compiled loss");
    le.backward();
    lc.backward();
    lr.backward();
    opt_e.step();
    opt_c.step();
    {
      NoGradGuard ng;
      for (int k = 0; k < 3; ++k) {
        Tensor g = leaves[k]->grad();
        Tensor& buf = *bufs[k];
        buf = step == 0 ? g.clone() : add(mul(buf, o.momentum), g);
        Tensor next = sub(*leaves[k], mul(buf, o.lr));
        *leaves[k] = next;  // a new leaf with the updated values
        leaves[k]->set_requires_grad(true);
      }
    }
    for (auto* m : {eager.get(), comp.get()}) {
      const std::string who = m == eager.get() ? "eager " : "compiled ";
      expect_close(m->enc->param("weight"), w, who + "tied weight");
      expect_close(m->enc->param("bias"), b1, who + "enc.bias");
      expect_close(m->dec->param("bias"), b2, who + "dec.bias");
      ASSERT_TRUE(m->dec->param("weight").is_same(m->enc->param("weight")));
    }
  }
  for (const optim::SGD* opt : {&opt_e, &opt_c}) {
    const optim::OptimizerStateDict sd = opt->state_dict();
    ASSERT_EQ(sd.state.size(), 3u) << "one momentum buffer per tensor";
    expect_close(sd.state.at(0).at("momentum_buffer"), buf_w, "momentum buffer of the tied weight");
  }
  EXPECT_EQ(f.stats().compiles, 1);
}

// An optimizer handed the same tensor twice would step it twice: an error naming both positions.
TEST(TiedWeights, OptimizerRejectsATensorListedTwice) {
  auto m = std::make_shared<TiedAutoencoder>(4);
  std::vector<Tensor> slots;
  for (auto& [n, t] : m->named_parameters(/*remove_duplicate=*/false)) slots.push_back(t);
  ASSERT_EQ(slots.size(), 4u);
  try {
    optim::SGD opt(slots, optim::SGDOptions{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 2 is parameter 0 again"), std::string::npos)
        << e.what();
  }
}
