#include "lathe/distributed/process_group.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <cstdio>

#include "lathe/base/error.h"
#include "lathe/distributed/tcp_store.h"

namespace lathe::distributed {
namespace {

using detail::str;

std::string megabytes(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

bool is_local(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.empty();
}

// The tensors' description for errors and Work::what: "2 tensors, 4.0 MB f32".
std::string describe(const std::vector<Tensor>& ts) {
  size_t bytes = 0;
  for (const Tensor& t : ts) bytes += t.nbytes();
  return str(ts.size(), ts.size() == 1 ? " tensor, " : " tensors, ", megabytes(bytes),
             ts.empty() ? "" : str(" ", dtype_name(ts[0].dtype())));
}

void check_tensor(const Tensor& t, const char* op) {
  LATHE_CHECK(t.defined(), "[distributed] ", op, ": an undefined tensor");
  LATHE_CHECK(t.device().kind() == DeviceKind::cpu, "[distributed] ", op,
              ": tensors must be on the CPU (got ", t.shape_string(),
              " on another device; .to(Device::cpu()) first)");
  LATHE_CHECK(t.is_contiguous(), "[distributed] ", op, ": tensor ", t.shape_string(),
              " is not contiguous (.contiguous() first)");
}

template <class T>
void reduce_sum(const std::shared_ptr<gloo::Context>& ctx, const Tensor& t, uint32_t tag,
                std::chrono::milliseconds timeout) {
  gloo::AllreduceOptions o(ctx);
  o.setOutput(static_cast<T*>(t.raw_data()), static_cast<size_t>(t.numel()));
  o.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>));
  o.setTag(tag);
  o.setTimeout(timeout);
  gloo::allreduce(o);
}

template <class T>
void divide(const Tensor& t, int n) {
  T* p = static_cast<T*>(t.raw_data());
  const int64_t count = t.numel();
  for (int64_t i = 0; i < count; ++i) p[i] /= static_cast<T>(n);
}

// Process-wide default group.
std::mutex default_mu;
std::shared_ptr<ProcessGroup> default_group;

}  // namespace

// ---- Work ----

void Work::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool Work::is_completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

// ---- ProcessGroup ----

ProcessGroup::ProcessGroup(const ProcessGroupOptions& options) : options_(options) {
  const ProcessGroupOptions& o = options_;
  LATHE_CHECK(o.world_size >= 1 && o.rank >= 0 && o.rank < o.world_size, "[distributed] rank ",
              o.rank, " is not in 0..", o.world_size - 1);
  std::shared_ptr<gloo::rendezvous::Store> store;
  if (!o.init_dir.empty()) {
    store = std::make_shared<gloo::rendezvous::FileStore>(o.init_dir);
  } else {
    store = std::make_shared<TcpStore>(o.master_addr, o.master_port, o.rank == 0, o.timeout);
  }
  store_ = store;
  gloo::transport::tcp::attr attr;
  attr.hostname = !o.hostname.empty() ? o.hostname : is_local(o.master_addr) ? "127.0.0.1" : "";
  if (attr.hostname.empty()) {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    attr.hostname = host;
  }
  try {
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(o.rank, o.world_size);
    context->setTimeout(o.timeout);
    gloo::rendezvous::PrefixStore prefixed("lathe_pg", *store);
    context->connectFullMesh(prefixed, device);
    context_ = context;
  } catch (const std::exception& e) {
    LATHE_CHECK(false, "[distributed] rank ", o.rank, " of ", o.world_size,
                " could not connect to the other ranks (", o.to_string(), ", this rank at ",
                attr.hostname, "): ", e.what());
  }
  thread_ = std::thread([this] { loop(); });
  // Every rank is connected before any leaves the constructor: rank 0 keeps serving the store
  // until then.
  barrier()->wait();
}

ProcessGroup::~ProcessGroup() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Work> ProcessGroup::enqueue(std::string what,
                                            std::function<void(uint32_t tag)> run) {
  auto work = std::make_shared<Work>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    LATHE_CHECK(!stopping_, "[distributed] ", what, " on a process group being destroyed");
    work->what_ = str(what, " #", ++sequence_);
    queue_.emplace_back(work, std::move(run));
  }
  cv_.notify_all();
  return work;
}

void ProcessGroup::loop() {
  for (;;) {
    std::shared_ptr<Work> work;
    std::function<void(uint32_t)> run;
    std::string failed;
    uint32_t tag = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      work = std::move(queue_.front().first);
      run = std::move(queue_.front().second);
      queue_.pop_front();
      failed = failed_;
      tag = static_cast<uint32_t>(stats_.collectives++ & 0x7fffffff);
    }
    std::exception_ptr error;
    if (!failed.empty()) {
      error = std::make_exception_ptr(
          Error(str("[distributed] rank ", rank(), ": ", work->what(),
                    " refused: an earlier collective on this process group failed: ", failed)));
    } else {
      try {
        run(tag);
      } catch (const std::exception& e) {
        const std::string msg =
            str("[distributed] rank ", rank(), " of ", size(), ": ", work->what(),
                " failed: ", e.what(),
                ". Another rank died or stopped calling collectives (each collective waits "
                "at most ",
                options_.timeout.count() / 1000.0,
                " s: LATHE_DIST_TIMEOUT); every rank must issue the same collectives in order");
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (failed_.empty()) failed_ = str(work->what(), ": ", e.what());
        }
        error = std::make_exception_ptr(Error(msg));
      }
    }
    work->finish(error);
  }
}

std::shared_ptr<Work> ProcessGroup::all_reduce(std::vector<Tensor> tensors, ReduceOp op) {
  for (const Tensor& t : tensors) {
    check_tensor(t, "all_reduce");
    const DType d = t.dtype();
    LATHE_CHECK(d == DType::f32 || d == DType::f64 || d == DType::i32 || d == DType::i64,
                "[distributed] all_reduce: ", dtype_name(d), " tensor ", t.shape_string(),
                " is not supported (f32, f64, i32, i64; reduce a bf16 gradient in f32)");
    LATHE_CHECK(op == ReduceOp::sum || is_floating(d),
                "[distributed] all_reduce: average of an integer tensor ", t.shape_string());
  }
  size_t bytes = 0;
  for (const Tensor& t : tensors) bytes += t.nbytes();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.bytes += static_cast<int64_t>(bytes);
  }
  const std::string what = str(op == ReduceOp::sum ? "all_reduce(sum)" : "all_reduce(average)",
                               " (", describe(tensors), ")");
  auto ctx = context_;
  const auto timeout = options_.timeout;
  const int n = size();
  return enqueue(what, [ctx, tensors = std::move(tensors), op, timeout, n](uint32_t tag) {
    for (const Tensor& t : tensors) {
      if (t.numel() == 0) continue;
      switch (t.dtype()) {
        case DType::f32:
          reduce_sum<float>(ctx, t, tag, timeout);
          break;
        case DType::f64:
          reduce_sum<double>(ctx, t, tag, timeout);
          break;
        case DType::i32:
          reduce_sum<int32_t>(ctx, t, tag, timeout);
          break;
        default:
          reduce_sum<int64_t>(ctx, t, tag, timeout);
          break;
      }
      if (op == ReduceOp::average && n > 1) {
        if (t.dtype() == DType::f32)
          divide<float>(t, n);
        else
          divide<double>(t, n);
      }
      t.bump_version();
    }
  });
}

std::shared_ptr<Work> ProcessGroup::broadcast(std::vector<Tensor> tensors, int root) {
  LATHE_CHECK(root >= 0 && root < size(), "[distributed] broadcast: root ", root,
              " is not a rank of this group (0..", size() - 1, ")");
  size_t bytes = 0;
  for (const Tensor& t : tensors) {
    check_tensor(t, "broadcast");
    bytes += t.nbytes();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.bytes += static_cast<int64_t>(bytes);
  }
  auto ctx = context_;
  const auto timeout = options_.timeout;
  return enqueue(str("broadcast from rank ", root, " (", describe(tensors), ")"),
                 [ctx, tensors = std::move(tensors), root, timeout](uint32_t tag) {
                   for (const Tensor& t : tensors) {
                     if (t.nbytes() == 0) continue;
                     gloo::BroadcastOptions o(ctx);
                     o.setOutput(static_cast<uint8_t*>(t.raw_data()), t.nbytes());
                     o.setRoot(root);
                     o.setTag(tag);
                     o.setTimeout(timeout);
                     gloo::broadcast(o);
                     t.bump_version();
                   }
                 });
}

std::shared_ptr<Work> ProcessGroup::all_gather(const Tensor& input, Tensor* gathered) {
  check_tensor(input, "all_gather");
  LATHE_CHECK(gathered != nullptr, "[distributed] all_gather: no output tensor");
  Shape sizes{SymInt(size())};
  for (const SymInt& s : input.sizes()) sizes.push_back(s);
  *gathered = empty(sizes, input.dtype());
  const Tensor in = input, out = *gathered;
  auto ctx = context_;
  const auto timeout = options_.timeout;
  return enqueue(str("all_gather (", describe({input}), " per rank)"),
                 [ctx, in, out, timeout](uint32_t tag) {
                   if (in.nbytes() == 0) return;
                   gloo::AllgatherOptions o(ctx);
                   o.setInput(static_cast<uint8_t*>(in.raw_data()), in.nbytes());
                   o.setOutput(static_cast<uint8_t*>(out.raw_data()), out.nbytes());
                   o.setTag(tag);
                   o.setTimeout(timeout);
                   gloo::allgather(o);
                 });
}

std::shared_ptr<Work> ProcessGroup::barrier() {
  auto ctx = context_;
  const auto timeout = options_.timeout;
  return enqueue("barrier", [ctx, timeout](uint32_t tag) {
    gloo::BarrierOptions o(ctx);
    o.setTag(tag);
    o.setTimeout(timeout);
    gloo::barrier(o);
  });
}

ProcessGroup::Stats ProcessGroup::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

// ---- the default group ----

std::shared_ptr<ProcessGroup> init_process_group(const ProcessGroupOptions& options) {
  std::lock_guard<std::mutex> lock(default_mu);
  LATHE_CHECK(!default_group, "[distributed] init_process_group: the default group exists (",
              default_group ? default_group->options().to_string() : "", ")");
  default_group = std::make_shared<ProcessGroup>(options);
  return default_group;
}

std::shared_ptr<ProcessGroup> default_process_group() {
  std::lock_guard<std::mutex> lock(default_mu);
  LATHE_CHECK(
      default_group != nullptr,
      "[distributed] no process group: call lathe::distributed::init_process_group() first");
  return default_group;
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(default_mu);
  return default_group != nullptr;
}

void destroy_process_group() {
  std::shared_ptr<ProcessGroup> g;
  {
    std::lock_guard<std::mutex> lock(default_mu);
    g = std::move(default_group);
  }
}

}  // namespace lathe::distributed
