// One rank of the multi-process tests (tests/distributed/test_distributed.cpp starts N of them
// with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set). Usage: lathe_dist_worker SCENARIO [ARGS].
// Prints "OK ..." and exits 0 on success; prints "ERROR <message>" and exits 3 when a Lathe
// error is thrown (the tests read the message); exits 1 when a check fails.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "lathe/core/random.h"
#include "lathe/distributed/ddp.h"
#include "lathe/nn/layers.h"
#include "lathe/ops/ops.h"
#include "lathe/optim/optimizer.h"
#include "lathe/trace/compile.h"

using namespace lathe;
using namespace lathe::distributed;

namespace {

int fail(const std::string& what) {
  std::printf("FAIL %s\n", what.c_str());
  return 1;
}

bool near(double a, double b, double tol) { return std::abs(a - b) <= tol; }

// all_reduce (sum, average, i64), broadcast from rank 1, all_gather, barrier.
int collectives() {
  auto g = init_process_group();
  const int r = g->rank(), n = g->size();
  Tensor a = from_vector<float>({1.0f * r, 2.0f * r + 1, -3.0f}, {3});
  Tensor b = from_vector<double>({1.0 * r}, {1});
  Tensor c = from_vector<int64_t>({r + 1}, {1});
  auto w1 = g->all_reduce({a, c});
  auto w2 = g->all_reduce({b}, ReduceOp::average);
  w1->wait();
  w2->wait();
  const double sum_r = n * (n - 1) / 2.0;
  const auto av = a.to_vector<float>();
  if (!near(av[0], sum_r, 1e-5) || !near(av[1], 2 * sum_r + n, 1e-5) ||
      !near(av[2], -3.0 * n, 1e-5))
    return fail("all_reduce sum f32");
  if (!near(b.item(), sum_r / n, 1e-12)) return fail("all_reduce average f64");
  if (c.item() != n * (n + 1) / 2) return fail("all_reduce sum i64");
  const int root = n > 1 ? 1 : 0;
  Tensor x = from_vector<float>({10.0f * r, 7.0f}, {2});
  g->broadcast({x}, root)->wait();
  if (x.to_vector<float>()[0] != 10.0f * root) return fail("broadcast");
  Tensor gathered;
  g->all_gather(from_vector<int64_t>({r, 100 + r}, {2}), &gathered)->wait();
  const auto gv = gathered.to_vector<int64_t>();
  if (gathered.dim() != 2 || gathered.sizes()[0].expect_int() != n) return fail("all_gather shape");
  for (int k = 0; k < n; ++k)
    if (gv[2 * k] != k || gv[2 * k + 1] != 100 + k) return fail("all_gather values");
  g->barrier()->wait();
  std::printf("OK collectives rank %d of %d, %lld collectives\n", r, n,
              static_cast<long long>(g->stats().collectives));
  return 0;
}

std::shared_ptr<nn::Sequential> make_model(bool extra_layer) {
  manual_seed(1234);
  auto m = nn::make<nn::Sequential>();
  m->push_back(nn::make<nn::Conv2d>(1, 4, 3, 1, 1));
  m->push_back(nn::make<nn::ReLU>());
  m->push_back(nn::make<nn::Flatten>(1));
  m->push_back(nn::make<nn::Linear>(4 * 6 * 6, 16));
  m->push_back(nn::make<nn::Tanh>());
  if (extra_layer) m->push_back(nn::make<nn::Linear>(16, 16));
  m->push_back(nn::make<nn::Linear>(16, 3));
  for (Tensor& p : m->parameters()) p.set_requires_grad(true);
  return m;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& kind, nn::Module& m) {
  if (kind == "adam") {
    optim::AdamOptions o;
    o.lr = 1e-2;
    return std::make_unique<optim::Adam>(m.parameters(), o);
  }
  optim::SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  return std::make_unique<optim::SGD>(m.parameters(), o);
}

// ddp MODE(eager|compile|unsynced) OPT(sgd|adam) ACCUM(1|2): N ranks on B/N each, several steps,
// against one process on B (computed here too, on a second copy of the model).
int ddp(const std::string& mode, const std::string& opt_kind, int accum) {
  auto g = init_process_group();
  const int r = g->rank(), n = g->size();
  constexpr int kBatch = 12, kSteps = 4;
  LATHE_CHECK(kBatch % (n * accum) == 0, "batch ", kBatch, " does not split over ", n, " x ",
              accum);
  auto reference = make_model(false);
  auto replica = make_model(false);
  DistributedDataParallelOptions o;
  o.bucket_bytes = 1024;  // several buckets on this small model
  o.first_bucket_bytes = 256;
  DistributedDataParallel model(replica, g, o);
  auto opt_ref = make_optimizer(opt_kind, *reference);
  auto opt = make_optimizer(opt_kind, *replica);
  nn::Module* m = replica.get();
  CompiledFunction loss_of =
      compile([m](const std::vector<Tensor>& a) { return cross_entropy(m->forward(a[0]), a[1]); });
  Generator data(99);
  for (int step = 0; step < kSteps; ++step) {
    const Tensor x = randn({kBatch, 1, 6, 6}, DType::f32, &data);
    const Tensor y = from_vector<int64_t>({0, 1, 2, 2, 1, 0, 1, 1, 0, 2, 2, 0}, {kBatch});
    opt_ref->zero_grad();
    cross_entropy(reference->forward(x), y).backward();
    opt_ref->step();

    opt->zero_grad();
    const int64_t share = kBatch / n, micro = share / accum;
    for (int k = 0; k < accum; ++k) {
      const Tensor xs = x.narrow(0, r * share + k * micro, micro).contiguous();
      const Tensor ys = y.narrow(0, r * share + k * micro, micro).contiguous();
      auto run = [&] {
        Tensor loss = mode == "compile" ? loss_of({xs, ys})[0] : cross_entropy(model(xs), ys);
        mul(loss, 1.0 / accum).backward();
      };
      if (k + 1 < accum || mode == "unsynced") {  // unsynced: the check's negative control
        auto guard = model.no_sync();
        run();
      } else {
        run();
      }
    }
    opt->step();
  }
  double worst = 0;
  const auto ref = reference->named_parameters();
  const auto got = replica->named_parameters();
  for (size_t i = 0; i < ref.size(); ++i) {
    const auto a = ref[i].second.to_vector<double>(), b = got[i].second.to_vector<double>();
    for (size_t k = 0; k < a.size(); ++k)
      worst = std::max(worst, std::abs(a[k] - b[k]) / std::max(1.0, std::abs(a[k])));
  }
  const auto& s = model.stats();
  std::printf(
      "RESULT rank %d of %d %s %s accum %d: max param diff %.3g, buckets %zu, "
      "backwards reduced %lld, bucket all-reduces %lld, started during backward %lld%s\n",
      r, n, mode.c_str(), opt_kind.c_str(), accum, worst, model.bucket_names().size(),
      static_cast<long long>(s.backwards), static_cast<long long>(s.buckets_started),
      static_cast<long long>(s.buckets_started_during_backward),
      mode == "compile" ? lathe::detail::str(", compiles ", loss_of.stats().compiles).c_str() : "");
  if (!(worst <= 2e-5)) return fail("parameters differ from the one-process run");
  if (s.backwards != kSteps) return fail("a backward did not reduce");
  std::printf("OK ddp\n");
  return 0;
}

// Rank 1 builds a model with one more layer: the DDP constructor fails on every rank.
int mismatch() {
  auto g = init_process_group();
  DistributedDataParallel model(make_model(g->rank() == 1), g);
  return fail("the mismatched models were not detected");
}

// killed / stuck: rank 1 dies (SIGKILL) or stops calling collectives after a few all-reduces;
// the other ranks must fail with an error, not hang.
int lost_rank(bool killed) {
  auto g = init_process_group();
  Tensor t = zeros({4096});
  for (int i = 0;; ++i) {
    if (g->rank() == 1 && i == 3) {
      if (killed) raise(SIGKILL);
      std::this_thread::sleep_for(std::chrono::hours(1));
    }
    g->all_reduce({t})->wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string scenario = argc > 1 ? argv[1] : "";
  try {
    if (scenario == "collectives") return collectives();
    if (scenario == "ddp" && argc == 5) return ddp(argv[2], argv[3], std::atoi(argv[4]));
    if (scenario == "mismatch") return mismatch();
    if (scenario == "killed") return lost_rank(true);
    if (scenario == "stuck") return lost_rank(false);
    if (scenario == "exit") return std::atoi(argv[2]) == std::atoi(std::getenv("RANK")) ? 7 : 0;
  } catch (const std::exception& e) {
    std::printf("ERROR %s\n", e.what());
    return 3;
  }
  std::fprintf(stderr,
               "usage: lathe_dist_worker collectives|ddp MODE OPT ACCUM|mismatch|killed|"
               "stuck|exit RANK\n");
  return 2;
}
