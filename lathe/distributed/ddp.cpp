#include "lathe/distributed/ddp.h"

#include <chrono>
#include <cstring>

#include "lathe/base/error.h"
#include "lathe/core/grad_mode.h"
#include "lathe/ops/autograd.h"

namespace lathe::distributed {
namespace {

using detail::str;

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Broadcasts tensors from rank 0, through contiguous copies where a tensor is not contiguous.
void broadcast_from_rank0(ProcessGroup& g, const std::vector<Tensor>& ts) {
  std::vector<Tensor> send, copies;
  std::vector<size_t> copied;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (ts[i].is_contiguous()) {
      send.push_back(ts[i]);
    } else {
      copies.push_back(ts[i].clone());
      send.push_back(copies.back());
      copied.push_back(i);
    }
  }
  g.broadcast(send, 0)->wait();
  NoGradGuard no_grad;
  for (size_t k = 0; k < copied.size(); ++k) const_cast<Tensor&>(ts[copied[k]]).copy_(copies[k]);
}

}  // namespace

struct DistributedDataParallel::Bucket {
  std::vector<size_t> params;    // indices into params_
  std::vector<int64_t> offsets;  // element offset of each in flat
  DType dtype = DType::f32;
  int64_t numel = 0;
  size_t pending = 0;  // parameters whose gradient is not in yet (this backward)
  Tensor flat;
  std::shared_ptr<Work> work;
  int64_t nodes_at_start = 0;  // the backward's nodes run when the all-reduce started
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<ProcessGroup> group,
                                                 DistributedDataParallelOptions options)
    : module_(std::move(module)), group_(std::move(group)), options_(options) {
  LATHE_CHECK(module_ != nullptr, "[DistributedDataParallel] no module");
  LATHE_CHECK(group_ != nullptr, "[DistributedDataParallel] no process group");
  LATHE_CHECK(options_.bucket_bytes > 0 && options_.first_bucket_bytes > 0,
              "[DistributedDataParallel] bucket sizes must be positive");
  for (auto& [name, p] : module_->named_parameters()) {
    LATHE_CHECK(p.device().kind() == DeviceKind::cpu, "[DistributedDataParallel] parameter ", name,
                " is not on the CPU (Gloo reduces CPU tensors)");
    if (p.requires_grad()) params_.emplace_back(name, p);
  }
  check_replicas();
  std::vector<Tensor> state;
  for (auto& [name, p] : module_->named_parameters()) state.push_back(p);
  for (auto& [name, b] : module_->named_buffers()) state.push_back(b);
  if (group_->size() > 1) broadcast_from_rank0(*group_, state);
  build_buckets();
  ready_.assign(params_.size(), false);
  for (size_t i = 0; i < params_.size(); ++i)
    hook_ids_.push_back(autograd::register_post_accumulate_grad_hook(
        params_[i].second, [this, i](const Tensor&) { on_grad_ready(i); }));
}

DistributedDataParallel::~DistributedDataParallel() {
  for (size_t i = 0; i < params_.size(); ++i)
    autograd::remove_post_accumulate_grad_hook(params_[i].second, hook_ids_[i]);
}

// Every rank must hold the same parameters: count, elements, and a hash of names and shapes.
void DistributedDataParallel::check_replicas() {
  int64_t numel = 0;
  uint64_t h = fnv1a("lathe-ddp");
  for (const auto& [name, p] : module_->named_parameters()) {
    numel += p.numel();
    h = fnv1a(str(name, p.shape_string(), dtype_name(p.dtype()), p.requires_grad(), ";"), h);
  }
  const auto buffers = module_->named_buffers();
  for (const auto& [name, b] : buffers) h = fnv1a(str(name, b.shape_string(), ";"), h);
  const int64_t count = static_cast<int64_t>(module_->named_parameters().size());
  const Tensor mine = from_vector<int64_t>(
      {count, numel, static_cast<int64_t>(buffers.size()), static_cast<int64_t>(h >> 1)}, {4});
  Tensor all;
  group_->all_gather(mine, &all)->wait();
  const std::vector<int64_t> v = all.to_vector<int64_t>();
  std::string diff;
  for (int r = 1; r < group_->size(); ++r) {
    const int64_t* a = &v[0];
    const int64_t* b = &v[4 * r];
    if (a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3]) continue;
    diff += str(
        "; rank ", r, " holds ", b[0], " parameters (", b[1], " elements) and ", b[2],
        " buffers, rank 0 holds ", a[0], " (", a[1], " elements) and ", a[2],
        a[0] == b[0] && a[1] == b[1] && a[2] == b[2] ? " (names, shapes or dtypes differ)" : "");
  }
  LATHE_CHECK(diff.empty(), "[DistributedDataParallel] the ranks hold different models", diff,
              ". Build the same model on every rank");
}

void DistributedDataParallel::build_buckets() {
  bucket_of_.assign(params_.size(), 0);
  std::unique_ptr<Bucket> cur;
  size_t cur_bytes = 0;
  auto close = [&] {
    if (!cur || cur->params.empty()) return;
    cur->flat = empty({SymInt(cur->numel)}, cur->dtype);
    buckets_.push_back(std::move(cur));
    cur.reset();
    cur_bytes = 0;
  };
  for (size_t k = params_.size(); k-- > 0;) {  // reverse order: the backward's order
    const Tensor& p = params_[k].second;
    const size_t cap = buckets_.empty() ? options_.first_bucket_bytes : options_.bucket_bytes;
    if (cur && (cur->dtype != p.dtype() || cur_bytes >= cap)) close();
    if (!cur) {
      cur = std::make_unique<Bucket>();
      cur->dtype = p.dtype();
    }
    LATHE_CHECK(p.dtype() == DType::f32 || p.dtype() == DType::f64,
                "[DistributedDataParallel] parameter ", params_[k].first, " is ",
                dtype_name(p.dtype()), "; gradients are reduced in f32 or f64");
    bucket_of_[k] = buckets_.size();
    cur->params.push_back(k);
    cur->offsets.push_back(cur->numel);
    cur->numel += p.numel();
    cur_bytes += p.nbytes();
  }
  close();
  for (auto& b : buckets_) b->pending = b->params.size();
}

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_names() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& b : buckets_) {
    out.emplace_back();
    for (size_t k : b->params) out.back().push_back(params_[k].first);
  }
  return out;
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  sync_buffers();
  return module_->forward(x);
}

std::vector<Tensor> DistributedDataParallel::forward_all(const std::vector<Tensor>& inputs) {
  sync_buffers();
  return module_->forward_all(inputs);
}

void DistributedDataParallel::sync_buffers() {
  if (!options_.broadcast_buffers || group_->size() == 1) return;
  std::vector<Tensor> bufs;
  for (auto& [name, b] : module_->named_buffers()) bufs.push_back(b);
  if (!bufs.empty()) broadcast_from_rank0(*group_, bufs);
}

void DistributedDataParallel::on_grad_ready(size_t i) {
  if (!sync_ || group_->size() == 1 || ready_[i]) return;
  if (!in_step_) {
    in_step_ = true;
    autograd::queue_callback([this] { finish_backward(); });
  }
  ready_[i] = true;
  --buckets_[bucket_of_[i]]->pending;
  start_ready_buckets();
}

void DistributedDataParallel::start_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_]->pending == 0) {
    Bucket& b = *buckets_[next_bucket_++];
    b.nodes_at_start = autograd::nodes_run_in_backward();
    start_bucket(b);
    ++stats_.buckets_started;
  }
}

void DistributedDataParallel::start_bucket(Bucket& b) {
  char* flat = static_cast<char*>(b.flat.raw_data());
  const size_t item = itemsize(b.dtype);
  for (size_t j = 0; j < b.params.size(); ++j) {
    const Tensor& p = params_[b.params[j]].second;
    const Tensor g = p.grad().contiguous();
    std::memcpy(flat + b.offsets[j] * item, g.raw_data(), g.nbytes());
  }
  b.work = group_->all_reduce({b.flat}, ReduceOp::average);
}

void DistributedDataParallel::finish_backward() {
  struct Reset {
    DistributedDataParallel& d;
    ~Reset() {
      d.in_step_ = false;
      d.next_bucket_ = 0;
      d.ready_.assign(d.params_.size(), false);
      for (auto& b : d.buckets_) {
        b->pending = b->params.size();
        b->work.reset();
      }
    }
  } reset{*this};
  std::string unused;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (ready_[i]) continue;
    if (!options_.find_unused_parameters) {
      unused += (unused.empty() ? "" : ", ") + params_[i].first;
      continue;
    }
    const Tensor& p = params_[i].second;
    if (!p.grad().defined()) p.set_grad(zeros(p.sizes(), p.dtype()));
    ready_[i] = true;
    --buckets_[bucket_of_[i]]->pending;
  }
  if (!unused.empty()) {
    // This rank starts no more buckets: the other ranks' all-reduces for them fail at the
    // group's timeout, each with its own error.
    LATHE_CHECK(false, "[DistributedDataParallel] rank ", group_->rank(),
                ": these parameters got no gradient in this backward: ", unused,
                ". Every parameter that requires grad must take part in the loss, or set "
                "DistributedDataParallelOptions::find_unused_parameters = true");
  }
  start_ready_buckets();
  const int64_t nodes = autograd::nodes_run_in_backward();
  for (auto& b : buckets_)
    if (b->nodes_at_start < nodes) ++stats_.buckets_started_during_backward;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& b : buckets_) b->work->wait();
  stats_.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& b : buckets_) {
    for (size_t j = 0; j < b->params.size(); ++j) {
      const Tensor& p = params_[b->params[j]].second;
      const Tensor avg = b->flat.narrow(0, b->offsets[j], p.numel()).view(p.sizes());
      Tensor g = p.grad();
      if (g.is_contiguous() && g.dtype() == b->dtype) {
        std::memcpy(g.raw_data(), avg.raw_data(), g.nbytes());
        g.bump_version();
      } else {
        p.set_grad(avg.clone());
      }
    }
  }
  ++stats_.backwards;
}

}  // namespace lathe::distributed
