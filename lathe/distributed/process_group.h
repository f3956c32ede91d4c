// A group of processes that run collectives together, on Gloo's TCP transport (PyTorch's CPU
// backend): all_reduce, broadcast, all_gather and barrier on CPU tensors. Collectives are
// asynchronous: each call queues the collective on the group's communication thread and returns
// a Work whose wait() returns once it is done (or rethrows its error). Every rank must issue the
// same collectives in the same order. Every collective fails after the group's timeout: a rank
// that died or stopped gives each other rank an error naming this rank, the collective and its
// sequence number, never a hang; after a failure the group refuses every later collective.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/distributed/dist_options.h"

namespace gloo {
class Context;
}

namespace lathe::distributed {

enum class ReduceOp { sum, average };

// One queued collective.
class Work {
 public:
  // Blocks until the collective is done; rethrows its error.
  void wait();
  bool is_completed() const;
  // "all_reduce #12 (1 tensor, 4.0 MB f32)"
  const std::string& what() const { return what_; }

 private:
  friend class ProcessGroup;
  void finish(std::exception_ptr error);
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::string what_;
};

class ProcessGroup {
 public:
  // Joins the group: rendezvous through the TCP store (or the shared file), then every pair of
  // ranks connects. Blocks until all world_size ranks have joined or the timeout passes.
  explicit ProcessGroup(const ProcessGroupOptions& options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return options_.rank; }
  int size() const { return options_.world_size; }
  const ProcessGroupOptions& options() const { return options_; }

  // In place on each tensor (CPU, contiguous; f32, f64, i32 or i64): the sum, or the average,
  // over the ranks. The tensors must stay alive and unwritten until wait().
  std::shared_ptr<Work> all_reduce(std::vector<Tensor> tensors, ReduceOp op = ReduceOp::sum);
  // Rank root's values into every rank's tensors (any dtype; same shapes on every rank).
  std::shared_ptr<Work> broadcast(std::vector<Tensor> tensors, int root = 0);
  // Every rank's `input` (same shape and dtype on every rank), stacked: *gathered becomes
  // [world_size, input sizes...], filled once wait() returns.
  std::shared_ptr<Work> all_gather(const Tensor& input, Tensor* gathered);
  std::shared_ptr<Work> barrier();

  // Collectives run and bytes they reduced or sent (this rank's tensors).
  struct Stats {
    int64_t collectives = 0;
    int64_t bytes = 0;
  };
  Stats stats() const;

 private:
  std::shared_ptr<Work> enqueue(std::string what, std::function<void(uint32_t tag)> run);
  void loop();

  ProcessGroupOptions options_;
  std::shared_ptr<void> store_;  // the rendezvous store (kept: rank 0 serves it)
  std::shared_ptr<gloo::Context> context_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<Work>, std::function<void(uint32_t)>>> queue_;
  bool stopping_ = false;
  std::string failed_;  // the first error: later collectives fail with it
  int64_t sequence_ = 0;
  Stats stats_;
  std::thread thread_;
};

// The process-wide default group (PyTorch's init_process_group): created from `options`, or
// from the environment (ProcessGroupOptions::from_env) when none are given. Throws if one exists.
std::shared_ptr<ProcessGroup> init_process_group(
    const ProcessGroupOptions& options = ProcessGroupOptions::from_env());
// The default group; throws when init_process_group was not called.
std::shared_ptr<ProcessGroup> default_process_group();
bool is_initialized();
// Leaves the default group (its destructor waits for queued collectives).
void destroy_process_group();

}  // namespace lathe::distributed
