// Data-parallel training, as PyTorch's DistributedDataParallel: every rank holds a replica of
// the module and trains it on its own share of the batch; gradients are averaged over the ranks
// during the backward, so every replica takes the same optimizer step.
//
// - Construction checks that the ranks hold the same parameters (count, names' hash, shapes) and
//   broadcasts parameters and buffers from rank 0.
// - Gradients are grouped into buckets (about bucket_bytes each, the first one first_bucket_bytes,
//   in reverse parameter order: the order the backward produces them). A post-accumulate hook on
//   every parameter counts down its bucket; a complete bucket is copied into one flat buffer and
//   all-reduced (average) on the process group's thread while the backward goes on. Buckets start
//   in index order on every rank. The backward's last step (an autograd callback) waits for every
//   bucket and copies the averages back into the parameters' .grad.
// - Works the same for eager training and for lathe::compile'd training steps (the compiled
//   backward is one autograd node: its parameters' hooks fire when it returns, so the buckets
//   start then; all-reduce nodes inside the compiled backward are not built).
// - no_sync(): backwards inside it only accumulate locally (gradient accumulation); the first
//   backward after it all-reduces the accumulated gradients.
// - Buffers (BatchNorm running statistics) are broadcast from rank 0 before every forward()
//   (PyTorch's broadcast_buffers=True); call sync_buffers() yourself when the step does not go
//   through forward() (a compiled step that calls the module directly).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "lathe/distributed/process_group.h"
#include "lathe/nn/module.h"

namespace lathe::distributed {

struct DistributedDataParallelOptions {
  size_t bucket_bytes = 25u << 20;       // PyTorch's bucket_cap_mb = 25
  size_t first_bucket_bytes = 1u << 20;  // small: the first all-reduce starts early
  bool broadcast_buffers = true;
  // A parameter that got no gradient in a backward: an error naming it (false, PyTorch's
  // default), or reduced as zeros (true; its .grad becomes zeros on every rank).
  bool find_unused_parameters = false;
};

class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module,
                          std::shared_ptr<ProcessGroup> group = default_process_group(),
                          DistributedDataParallelOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  nn::Module& module() { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  ProcessGroup& group() { return *group_; }

  // Broadcasts the buffers from rank 0 (when broadcast_buffers), then runs the module.
  Tensor forward(const Tensor& x);
  std::vector<Tensor> forward_all(const std::vector<Tensor>& inputs);
  Tensor operator()(const Tensor& x) { return forward(x); }
  void sync_buffers();

  // While the returned guard lives, backwards accumulate gradients locally only.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& d) : d_(d), prev_(d.sync_) { d_.sync_ = false; }
    ~NoSync() { d_.sync_ = prev_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& d_;
    bool prev_;
  };
  NoSync no_sync() { return NoSync(*this); }
  // The switch no_sync() flips (for bindings that cannot hold the guard): false while gradients
  // should only accumulate.
  void set_sync(bool on) { sync_ = on; }

  // The buckets, as lists of parameter names (bucket 0 first).
  std::vector<std::vector<std::string>> bucket_names() const;

  struct Stats {
    int64_t backwards = 0;        // backwards that reduced gradients
    int64_t buckets_started = 0;  // all bucket all-reduces started
    // Of those, started while the backward still had autograd nodes to run (the engine's node
    // count at the start is below its count at the end): communication that overlaps the
    // backward's compute. A compiled backward is one node, so its buckets never count here.
    int64_t buckets_started_during_backward = 0;
    double wait_seconds = 0;  // time the final callbacks spent waiting for all-reduces
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Bucket;
  void check_replicas();
  void build_buckets();
  void on_grad_ready(size_t param_index);
  void start_ready_buckets();
  void start_bucket(Bucket& b);
  void finish_backward();

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<ProcessGroup> group_;
  DistributedDataParallelOptions options_;
  std::vector<std::pair<std::string, Tensor>> params_;  // those that require grad
  std::vector<int64_t> hook_ids_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<size_t> bucket_of_;  // param index -> bucket
  std::vector<bool> ready_;        // param index -> its gradient is in (this backward)
  size_t next_bucket_ = 0;         // the next bucket to start
  bool in_step_ = false;           // a backward is reducing (its callback is queued)
  bool sync_ = true;
  Stats stats_;
};

}  // namespace lathe::distributed
