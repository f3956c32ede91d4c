// lathe-bench --training: a training step (forward, loss, backward, SGD-with-momentum step) per
// model. --performance times it per backend; --accuracy compares the gradients and the updated
// parameters after one step with an fp64 eager reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe_bench {

struct TrainingOptions {
  std::vector<std::string> backends;  // backends[0] is the baseline (eager)
  int64_t batch = 1;
  int64_t image_size = 0;  // CNN and vit input size (vit is built for it); 0: 224
  int64_t seq_len = 0;     // bert's sequence length; 0: 128
  int repeat = 30;
  int warmup = 3;
  double tolerance = 1e-4;
  std::string csv;
  std::string inject_error;  // --accuracy self-test: this backend's results are scaled by 1.01
  // --precision bf16 (performance only): mixed-precision training (AMP): forward and loss of
  // every backend under lathe::AutocastGuard (bf16), f32 master weights, gradients and update.
  bool amp = false;
};

// Prints the markdown table of step times (ms) and speedups over eager, and the geomean.
int run_training_performance(const TrainingOptions& o, const std::vector<std::string>& models);
// Prints pass / FAIL per model and backend; returns 1 on any failure.
int run_training_accuracy(const TrainingOptions& o, const std::vector<std::string>& models);
// One rank of --training --ddp N (RANK / WORLD_SIZE set by lathe-run): the data-parallel step on
// this rank's share of the batch against one process on the whole batch; rank 0 prints the table.
int run_training_ddp(const TrainingOptions& o, const std::vector<std::string>& models);

}  // namespace lathe_bench
