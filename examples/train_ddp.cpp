// Data-parallel training of the digits CNN (examples/digits.h) across processes: every rank
// trains a replica on its share of each batch of 64, DistributedDataParallel averages the
// gradients over the ranks during the backward (Gloo, TCP), so the replicas stay equal.
//
//   build/lathe-run --nproc-per-node 2 build/train_ddp [epochs] [--eager]
//
// Each rank reads RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT (lathe-run or torchrun set
// them); without them it trains alone. The step is compiled (lathe::compile traces forward and
// loss once; DDP's hooks fire when the compiled backward has filled .grad) unless --eager.
// Rank 0 prints a line per epoch.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "examples/digits.h"
#include "lathe/distributed/ddp.h"
#include "lathe/optim/lr_scheduler.h"
#include "lathe/optim/optimizer.h"
#include "lathe/trace/compile.h"

using namespace lathe;
using namespace lathe::examples::digits;

int main(int argc, char** argv) {
  Args args{4};
  if (!parse_args(argc, argv, "train_ddp", &args)) return 2;
  const int epochs = args.epochs;
  const bool eager = args.eager;
  auto group = distributed::init_process_group();
  const int rank = group->rank(), world = group->size();
  const int64_t batch = 64;
  if (batch % world != 0) {
    std::fprintf(stderr, "train_ddp: the batch of %lld does not split over %d ranks\n",
                 static_cast<long long>(batch), world);
    return 2;
  }
  const int64_t per_rank = batch / world;

  manual_seed(0);  // every rank builds the same model (DDP broadcasts rank 0's anyway)
  auto model = make_model();
  model->train();
  for (Tensor& p : model->parameters()) p.set_requires_grad(true);
  distributed::DistributedDataParallel ddp(model, group);
  const Dataset train = make_dataset(4096, 1), test = make_dataset(1024, 2);

  optim::AdamOptions o;
  o.lr = 1e-2;
  o.weight_decay = 1e-4;
  optim::AdamW opt(model->parameters(), o);
  optim::CosineAnnealingLR schedule(opt, epochs);
  nn::Module* m = model.get();
  CompiledFunction loss_of =
      compile([m](const std::vector<Tensor>& a) { return cross_entropy(m->forward(a[0]), a[1]); });
  if (rank == 0)
    std::printf("train_ddp: %d rank(s), batch %lld (%lld per rank), %s step\n", world,
                static_cast<long long>(batch), static_cast<long long>(per_rank),
                eager ? "eager" : "compiled");

  const int64_t n = train.images.size(0).expect_int();
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    double total = 0;
    int steps = 0;
    for (int64_t start = 0; start + batch <= n; start += batch) {
      const int64_t mine = start + rank * per_rank;
      Tensor x = train.images.narrow(0, mine, per_rank).contiguous();
      Tensor y = train.labels.narrow(0, mine, per_rank).contiguous();
      opt.zero_grad();
      Tensor loss;
      if (eager) {
        loss = cross_entropy(ddp(x), y);
      } else {
        ddp.sync_buffers();  // the compiled step calls the module, not ddp.forward
        loss = loss_of({x, y})[0];
      }
      loss.backward();  // averages the gradients over the ranks
      opt.step();
      total += loss.item();
      ++steps;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    schedule.step();
    if (rank == 0) {
      std::printf(
          "epoch %d/%d  loss %.4f (rank 0's share)  test accuracy %.3f  %.2f s  "
          "(%lld bucket all-reduces, %lld overlapping the backward)\n",
          epoch, epochs, total / steps, accuracy(*model, test), seconds,
          static_cast<long long>(ddp.stats().buckets_started),
          static_cast<long long>(ddp.stats().buckets_started_during_backward));
      std::fflush(stdout);
    }
  }
  return 0;
}
