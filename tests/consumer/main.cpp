// The first program of a C++ user: one header, one target. It checks what a program built outside
// Lathe's tree gets: the version, Tensor's op members (registered from the headers, no linker
// flags), a compiled function against eager, the lazy device, a module's backward and an
// optimizer step. Prints "consumer OK" and exits 0, or names what failed and exits 1.
#include <lathe/lathe.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "consumer FAILED: %s\n", what);
    failures++;
  }
}

double max_abs_diff(const lathe::Tensor& a, const lathe::Tensor& b) {
  return lathe::amax(lathe::abs(lathe::sub(a, b))).item();
}

}  // namespace

int run() {
  using lathe::Tensor;
  expect(std::strcmp(lathe::version(), LATHE_VERSION_STRING) == 0,
         "lathe::version() is the headers' LATHE_VERSION_STRING");
  expect(LATHE_VERSION >= LATHE_VERSION_AT(0, 1, 0), "LATHE_VERSION >= 0.1.0");

  lathe::manual_seed(0);
  Tensor x = lathe::randn({4, 8});
  // A Tensor member implemented by lathe_ops (core/tensor_methods.h).
  Tensor v = x.reshape({8, 4}).transpose(0, 1);
  expect(v.sizes() == lathe::Shape{4, 8}, "reshape + transpose shape");

  auto eager = [](const Tensor& a) { return lathe::relu(a) * 2.0 + 1.0; };
  auto f = lathe::compile([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{eager(a[0])}; });
  Tensor want = eager(x);
  Tensor got = f({x})[0];
  got = f({x})[0];  // the second call replays the compiled executable
  expect(max_abs_diff(got, want) == 0.0, "lathe::compile equals eager");

  Tensor on_lazy = eager(x.to(lathe::Device::lazy()));
  lathe::sync();
  expect(max_abs_diff(on_lazy.to(lathe::Device::cpu()), want) == 0.0, "lazy device equals eager");

  lathe::nn::Linear linear(8, 3);
  for (Tensor& p : linear.parameters()) p.set_requires_grad(true);
  lathe::optim::SGD sgd(linear.parameters(), lathe::optim::SGDOptions{.lr = 0.1});
  Tensor loss = lathe::sum(linear.forward(x));
  loss.backward();
  double before = loss.item();
  sgd.step();
  double after = lathe::sum(linear.forward(x)).item();
  expect(linear.parameters()[0].grad().defined(), "backward fills the weight's grad");
  expect(after < before, "an SGD step on sum(linear(x)) lowers it");

  if (failures > 0) return 1;
  std::printf("consumer OK: lathe %s (headers %s), compile/lazy/eager agree, loss %.4f -> %.4f\n",
              lathe::version(), LATHE_VERSION_STRING, before, after);
  return 0;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer FAILED: %s\n", e.what());
    return 1;
  }
}
