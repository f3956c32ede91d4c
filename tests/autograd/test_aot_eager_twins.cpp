// Compiled training beside an eager twin (issue 33): the same initial values, the same steps, and
// after each step the same loss, the same defined / undefined grad() of every parameter and input,
// the same parameters and the same optimizer state. Each test is a case the compiled path got
// wrong: gradients for outputs that were not backpropagated, detach(), verification mode, a
// parameter frozen between steps, an argument written in place.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "lathe/core/grad_mode.h"
#include "lathe/core/random.h"
#include "lathe/nn/layers.h"
#include "lathe/nn/module.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/optimizer.h"
#include "lathe/trace/compile.h"

using namespace lathe;
using V = std::vector<Tensor>;
using Named = std::vector<std::pair<std::string, Tensor>>;

namespace {

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.defined(), want.defined())
      << what << ": compiled " << (got.defined() ? "defined" : "undefined") << ", eager "
      << (want.defined() ? "defined" : "undefined");
  if (!got.defined()) return;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  auto g = got.to(DType::f64).to_vector<double>();
  auto w = want.to(DType::f64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::abs(g[i] - w[i]), tol * (1 + std::abs(w[i])))
        << what << " element " << i << ": " << g[i] << " vs " << w[i];
}

// Every tensor's value and grad (defined or not), compiled against eager.
void expect_same_tensors(const Named& c, const Named& e, double tol) {
  ASSERT_EQ(c.size(), e.size());
  for (size_t i = 0; i < e.size(); ++i) {
    expect_close(c[i].second, e[i].second, tol, e[i].first);
    expect_close(c[i].second.grad(), e[i].second.grad(), tol, "grad of " + e[i].first);
  }
}

void expect_same_state(const optim::Optimizer& c, const optim::Optimizer& e, double tol) {
  const optim::OptimizerStateDict sc = c.state_dict(), se = e.state_dict();
  ASSERT_EQ(sc.state.size(), se.state.size()) << "parameters with optimizer state";
  for (const auto& [index, entries] : se.state) {
    ASSERT_TRUE(sc.state.count(index)) << "compiled has no state for parameter " << index;
    for (const auto& [key, t] : entries)
      expect_close(sc.state.at(index).at(key), t, tol,
                   "state '" + key + "' of parameter " + std::to_string(index));
  }
}

Named with_prefix(const std::string& prefix, const nn::Module& m) {
  Named out;
  for (auto& [k, v] : m.named_parameters()) out.emplace_back(prefix + k, v);
  return out;
}

void require_grad(const Named& ps) {
  for (const auto& [k, v] : ps) Tensor(v).set_requires_grad(true);
}

// A trunk with two heads; one copy per seed (the same seed: the same initial values).
struct TwoHeads {
  std::shared_ptr<nn::Linear> trunk, a, b;
  explicit TwoHeads(uint64_t seed) {
    manual_seed(seed);
    trunk = nn::make<nn::Linear>(5, 8);
    a = nn::make<nn::Linear>(8, 3);
    b = nn::make<nn::Linear>(8, 2);
    for (auto* m : {trunk.get(), a.get(), b.get()}) m->to(DType::f64);
    require_grad(params());
  }
  Named params() const {
    Named p = with_prefix("trunk.", *trunk);
    for (auto& x : with_prefix("a.", *a)) p.push_back(x);
    for (auto& x : with_prefix("b.", *b)) p.push_back(x);
    return p;
  }
  // Head A of the trunk, and head B scaled by z.
  V forward(const Tensor& x, const Tensor& z) const {
    Tensor h = tanh(trunk->forward(x));
    return {a->forward(h), mul(b->forward(h), z)};
  }
};

std::vector<Tensor> param_tensors(const Named& n) {
  std::vector<Tensor> out;
  for (const auto& [k, v] : n) out.push_back(v);
  return out;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& kind, const Named& params) {
  if (kind == "sgd") {
    optim::SGDOptions o;
    o.lr = 0.1;
    o.momentum = 0.9;
    o.weight_decay = 0.01;
    return std::make_unique<optim::SGD>(param_tensors(params), o);
  }
  optim::AdamOptions o;
  o.lr = 0.05;
  o.weight_decay = 0.1;
  if (kind == "adam") return std::make_unique<optim::Adam>(param_tensors(params), o);
  return std::make_unique<optim::AdamW>(param_tensors(params), o);
}

}  // namespace

class TwinOptimizer : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Optimizers, TwinOptimizer, ::testing::Values("sgd", "adam", "adamw"));

// Backward through head A only: head B's parameters and z keep undefined grads (eager's), so
// weight decay and momentum leave them alone; later steps backpropagate head B, then both.
TEST_P(TwinOptimizer, OutputsNotBackpropagatedGiveNoGrads) {
  TwoHeads e(7), c(7);
  auto f = lathe::compile([&c](const V& a) { return c.forward(a[0], a[1]); });
  auto opt_e = make_optimizer(GetParam(), e.params());
  auto opt_c = make_optimizer(GetParam(), c.params());
  const int heads[] = {0, 0, 1, 2, 0};  // A, A, B, both, A
  for (int s = 0; s < 5; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    Generator gen(100 + s);
    Tensor x = randn({4, 5}, DType::f64, &gen);
    Tensor z = randn({4, 2}, DType::f64, &gen);
    Tensor ze = z.clone(), zc = z.clone();
    ze.set_requires_grad(true);
    zc.set_requires_grad(true);
    opt_e->zero_grad();
    opt_c->zero_grad();
    V oe = e.forward(x, ze), oc = f({x, zc});
    auto loss = [&](const V& o) {
      if (heads[s] == 0) return sum(o[0]);
      if (heads[s] == 1) return sum(o[1]);
      return add(sum(o[0]), sum(o[1]));
    };
    Tensor le = loss(oe), lc = loss(oc);
    expect_close(lc, le, 1e-12, "loss");
    le.backward();
    lc.backward();
    expect_close(zc.grad(), ze.grad(), 1e-12, "grad of z");
    expect_same_tensors(c.params(), e.params(), 1e-12);
    opt_e->step();
    opt_c->step();
    expect_same_tensors(c.params(), e.params(), 1e-12);
    expect_same_state(*opt_c, *opt_e, 1e-12);
  }
  EXPECT_EQ(f.stats().compiles, 1);
}

// Stop-gradient code: a target network read through detach() (its parameters require grad but
// get none), and a detached value of the online network inside the loss.
TEST(AotTwins, DetachStopsGradient) {
  TwoHeads e(11), c(11);  // trunk: online network; b: target network (5 -> 8 -> 2 via trunk)
  auto target_loss = [](const TwoHeads& m, const Tensor& x) -> V {
    Tensor h = m.trunk->forward(x);
    Tensor online = m.a->forward(tanh(h));
    Tensor target = m.a->forward(tanh(mul(h.detach(), 0.5))).detach();
    Tensor d = sub(online, target);
    Tensor pull = mul(h, h.detach());
    return {add(sum(mul(d, d)), mul(sum(pull), 0.01)), target};
  };
  auto f = lathe::compile([&](const V& a) { return target_loss(c, a[0]); });
  optim::SGDOptions o;
  o.lr = 0.05;
  o.momentum = 0.9;
  optim::SGD opt_e(param_tensors(e.params()), o), opt_c(param_tensors(c.params()), o);
  for (int s = 0; s < 3; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    Generator gen(200 + s);
    Tensor x = randn({4, 5}, DType::f64, &gen);
    opt_e.zero_grad();
    opt_c.zero_grad();
    V oe = target_loss(e, x), oc = f({x});
    expect_close(oc[0], oe[0], 1e-12, "loss");
    expect_close(oc[1], oe[1], 1e-12, "target");
    EXPECT_FALSE(oc[1].requires_grad());
    oe[0].backward();
    oc[0].backward();
    expect_same_tensors(c.params(), e.params(), 1e-12);
    opt_e.step();
    opt_c.step();
    expect_same_tensors(c.params(), e.params(), 1e-12);
    expect_same_state(opt_c, opt_e, 1e-12);
  }
  EXPECT_EQ(f.stats().compiles, 1);
}

// In-place input normalization: the argument (no grad) is written before the weights read it;
// the caller's tensor gets the write, as eager's. On both backends.
class TwinBackend : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Backends, TwinBackend, ::testing::Values("interpreter", "cpu"));

TEST_P(TwinBackend, ArgumentWrittenInPlace) {
  CompileOptions o;
  o.backend = GetParam();
  manual_seed(3);
  Tensor we = randn({3, 4}, DType::f64);
  Tensor wc = we.clone();
  we.set_requires_grad(true);
  wc.set_requires_grad(true);
  auto fn = [](Tensor x, const Tensor& w) {
    mul_(x, 2.0);
    return sum(tanh(linear(x, w)));
  };
  auto f = lathe::compile([&](const V& a) { return fn(a[0], wc); }, o);
  for (int s = 0; s < 3; ++s) {
    SCOPED_TRACE("call " + std::to_string(s));
    Generator gen(300 + s);
    Tensor x = randn({2, 4}, DType::f64, &gen);
    Tensor xe = x.clone(), xc = x.clone();
    we.set_grad({});
    wc.set_grad({});
    Tensor le = fn(xe, we), lc = f({xc})[0];
    expect_close(lc, le, 1e-12, "loss");
    expect_close(xc, xe, 0, "the argument after the call");
    le.backward();
    lc.backward();
    expect_close(wc.grad(), we.grad(), 1e-12, "grad of w");
    expect_close(xc, xe, 0, "the argument after backward");
  }
  EXPECT_EQ(f.stats().compiles, 1);
}

namespace {

std::shared_ptr<nn::Sequential> small_cnn(uint64_t seed) {
  manual_seed(seed);
  auto m = nn::make<nn::Sequential>();
  m->push_back(nn::make<nn::Conv2d>(3, 4, 3, 1, 1));
  m->push_back(nn::make<nn::BatchNorm2d>(4));
  m->push_back(nn::make<nn::ReLU>());
  m->push_back(nn::make<nn::Flatten>(1));
  m->push_back(nn::make<nn::Linear>(4 * 4 * 4, 3));
  m->to(DType::f64);
  m->train();
  require_grad(with_prefix("", *m));
  return m;
}

Named state_of(const nn::Module& m) {
  Named out;
  for (auto& [k, v] : m.state_dict())
    if (is_floating(v.dtype())) out.emplace_back(k, v);
  return out;
}

// SGD steps on both twins through `compiled` (its loss of a batch), comparing after each step.
// `between(s)` runs on both models before step s.
void train_twins(nn::Module& e, nn::Module& c, const CompiledFunction& compiled, int steps,
                 const std::function<void(int, nn::Module&)>& between) {
  optim::SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  optim::SGD opt_e(e.parameters(), o), opt_c(c.parameters(), o);
  for (int s = 0; s < steps; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    between(s, e);
    between(s, c);
    Generator gen(400 + s);
    Tensor x = randn({3, 3, 4, 4}, DType::f64, &gen);
    Tensor y = randint(0, 3, {3}, DType::i64, &gen);
    opt_e.zero_grad();
    opt_c.zero_grad();
    Tensor le = cross_entropy(e.forward(x), y);
    Tensor lc = compiled({x, y})[0];
    expect_close(lc, le, 1e-10, "loss");
    le.backward();
    lc.backward();
    expect_same_tensors(with_prefix("", c), with_prefix("", e), 1e-10);
    opt_e.step();
    opt_c.step();
    expect_same_tensors(state_of(c), state_of(e), 1e-10);
    expect_same_state(opt_c, opt_e, 1e-10);
  }
}

}  // namespace

// Verification mode runs the eager function beside each verified call: training steps must
// still backpropagate (the compiled node's saved tensors keep their versions).
TEST(AotTwins, VerifyModeTrains) {
  auto e = small_cnn(21), c = small_cnn(21);
  CompileOptions o;
  o.verify = true;
  o.verify_calls = 2;
  nn::Module* cm = c.get();
  auto f = lathe::compile([cm](const V& a) { return cross_entropy(cm->forward(a[0]), a[1]); }, o);
  train_twins(*e, *c, f, 3, [](int, nn::Module&) {});
  EXPECT_EQ(f.stats().verified_calls, 2);
}

// A layer frozen between steps: the next call recompiles before running (BatchNorm statistics
// updated once, as eager's), the recompile reason names the parameter, and its grad stays
// undefined.
TEST(AotTwins, FreezingAParameterRecompiles) {
  auto e = small_cnn(31), c = small_cnn(31);
  nn::Module* cm = c.get();
  auto f = lathe::compile([cm](const V& a) { return cross_entropy(cm->forward(a[0]), a[1]); });
  train_twins(*e, *c, f, 4, [](int s, nn::Module& m) {
    if (s == 2)
      for (auto& [k, v] : m.named_parameters())
        if (k == "0.weight") Tensor(v).set_requires_grad(false);
  });
  EXPECT_EQ(f.stats().compiles, 2);
  const std::string why = f.last_recompile_reason();
  EXPECT_NE(why.find("0.weight"), std::string::npos) << why;
  EXPECT_NE(why.find("requires_grad"), std::string::npos) << why;
}

// The write after the read is still refused: the backward would read the overwritten x.
TEST(AotTwins, ArgumentWrittenAfterTheGradientReadsItIsRefused) {
  manual_seed(4);
  Tensor w = randn({3, 4}, DType::f64);
  w.set_requires_grad(true);
  auto f = lathe::compile([&](const V& a) {
    Tensor x = a[0];
    Tensor loss = sum(tanh(linear(x, w)));
    mul_(x, 2.0);
    return loss;
  });
  try {
    f({randn({2, 4}, DType::f64)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overwrites"), std::string::npos) << e.what();
  }
}

// detach() in an inference entry (grad off) and a training one, on both backends: the alias
// runs like eager's.
TEST(AotTwins, DetachOnBothBackends) {
  for (const char* backend : {"interpreter", "cpu"}) {
    SCOPED_TRACE(backend);
    CompileOptions o;
    o.backend = backend;
    auto fn = [](const V& a) { return V{add(mul(a[0].detach(), 3.0), a[0].t().detach())}; };
    auto f = lathe::compile(fn, o);
    Generator gen(9);
    Tensor x = randn({3, 3}, DType::f64, &gen);
    {
      NoGradGuard no_grad;
      expect_close(f({x})[0], fn({x})[0], 0, "inference");
    }
    Tensor xr = x.clone();
    xr.set_requires_grad(true);
    Tensor y = f({xr})[0];
    EXPECT_FALSE(y.requires_grad());
    expect_close(y, fn({x})[0], 0, "with grad");
  }
}

// An EMA teacher updated inside the compiled step from the student's detached weights (no
// NoGradGuard): the teacher's weights are written in place, the student's get their gradient.
TEST(AotTwins, EmaTeacherUpdatedFromDetachedWeights) {
  TwoHeads e(13), c(13);  // a: student head, b: unused; teacher below
  auto make_teacher = [](const TwoHeads& m) {
    Tensor t = m.a->param("weight").detach().clone();
    return t;
  };
  Tensor te = make_teacher(e), tc = make_teacher(c);
  auto step = [](const TwoHeads& m, Tensor& teacher, const Tensor& x) {
    Tensor h = tanh(m.trunk->forward(x));
    Tensor s = m.a->forward(h);
    Tensor t = linear(h.detach(), teacher);
    mul_(teacher, 0.9);
    add_(teacher, mul(m.a->param("weight").detach(), 0.1));
    Tensor d = sub(s, t);
    return sum(mul(d, d));
  };
  auto f = lathe::compile([&](const V& a) { return step(c, tc, a[0]); });
  optim::SGDOptions o;
  o.lr = 0.05;
  optim::SGD opt_e(param_tensors(e.params()), o), opt_c(param_tensors(c.params()), o);
  for (int s = 0; s < 3; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    Generator gen(500 + s);
    Tensor x = randn({4, 5}, DType::f64, &gen);
    opt_e.zero_grad();
    opt_c.zero_grad();
    Tensor le = step(e, te, x), lc = f({x})[0];
    expect_close(lc, le, 1e-12, "loss");
    expect_close(tc, te, 1e-12, "teacher");
    le.backward();
    lc.backward();
    expect_same_tensors(c.params(), e.params(), 1e-12);
    opt_e.step();
    opt_c.step();
    expect_same_tensors(c.params(), e.params(), 1e-12);
  }
  EXPECT_EQ(f.stats().compiles, 1);
}
