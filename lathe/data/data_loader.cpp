#include "lathe/data/data_loader.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

namespace lathe::data {
namespace {

using Clock = std::chrono::steady_clock;

// A batch as a worker leaves it: the tensors, or the exception that stopped it, and the skip
// warnings to report on the caller's thread.
struct Produced {
  Batch batch;
  int64_t rows = 0;
  std::exception_ptr error;
  std::vector<std::string> warnings;
};

// Allocates one batch of `rows` samples and the per-field row pointers' bases.
Batch allocate_batch(const std::vector<FieldSpec>& fields, int64_t rows) {
  Batch b;
  for (const FieldSpec& f : fields) {
    Shape s{rows};
    for (int64_t d : f.shape) s.push_back(d);
    b.push_back(empty(s, f.dtype));
  }
  return b;
}

std::vector<void*> row_pointers(const Batch& b, const std::vector<FieldSpec>& fields, int64_t row) {
  std::vector<void*> out(fields.size());
  for (size_t f = 0; f < fields.size(); ++f)
    out[f] = static_cast<char*>(b[f].raw_data()) + static_cast<size_t>(row) * fields[f].nbytes();
  return out;
}

// Cuts a batch whose skipped samples left its last rows unused.
void shrink(Produced& p, int64_t capacity) {
  if (p.rows == capacity) return;
  for (Tensor& t : p.batch) t = t.narrow(0, 0, p.rows).contiguous();
}

}  // namespace

std::string LoaderProgress::format() const {
  char buf[160];
  const double rate = samples_per_second();
  if (total_batches >= 0) {
    const double eta = batches > 0 ? seconds * (total_batches - batches) / batches : 0.0;
    std::snprintf(buf, sizeof(buf), "batch %lld/%lld  %lld samples  %.1f samples/s  eta %.1f s",
                  static_cast<long long>(batches), static_cast<long long>(total_batches),
                  static_cast<long long>(samples), rate, eta);
  } else {
    std::snprintf(buf, sizeof(buf), "batch %lld  %lld samples  %.1f samples/s",
                  static_cast<long long>(batches), static_cast<long long>(samples), rate);
  }
  std::string s = buf;
  if (skipped > 0) s += detail::str("  ", skipped, " skipped");
  return s;
}

struct DataLoader::Epoch {
  const DataLoader* loader = nullptr;
  uint64_t epoch = 0;
  std::vector<FieldSpec> fields;
  std::vector<int64_t> order;  // random access: the sampler's indices
  int64_t total = 0;           // batches (-1: a stream)
  std::mutex mu;
  std::condition_variable cv;
  std::map<int64_t, Produced> ready;
  int64_t next_claim = 0;  // the next batch a worker takes
  int64_t consumed = 0;    // batches returned by next()
  bool stream_done = false;
  bool failed = false;  // an error was rethrown: the epoch is over
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  LoaderProgress progress;
  Clock::time_point t0 = Clock::now();

  ~Epoch() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    for (std::thread& t : workers) t.join();
  }

  int64_t window() const {
    const auto& o = loader->options_;
    return std::max(1, o.num_workers) * std::max(1, o.prefetch_batches);
  }

  // Reads batch b of a random-access epoch.
  Produced produce(int64_t b) {
    const auto& o = loader->options_;
    const int64_t n = static_cast<int64_t>(order.size());
    const int64_t begin = b * o.batch_size, capacity = std::min(o.batch_size, n - begin);
    Produced p;
    try {
      p.batch = allocate_batch(fields, capacity);
      for (int64_t i = 0; i < capacity && !stop; ++i) {
        const int64_t pos = begin + i, index = order[static_cast<size_t>(pos)];
        SampleRng rng = SampleRng::for_sample(o.seed, epoch, static_cast<uint64_t>(pos));
        try {
          loader->dataset_->read(index, row_pointers(p.batch, fields, p.rows), rng);
          ++p.rows;
        } catch (const CorruptSample& e) {
          if (!o.skip_corrupt) throw;
          p.warnings.push_back(
              detail::str("[data.DataLoader] skipping sample ", index, ": ", e.what()));
        }
      }
      shrink(p, capacity);
    } catch (...) {
      p.error = std::current_exception();
    }
    return p;
  }

  // Reads the next batch of a stream (called by one thread at a time); rows == 0 at the end.
  Produced produce_stream(int64_t b) {
    const auto& o = loader->options_;
    Produced p;
    try {
      p.batch = allocate_batch(fields, o.batch_size);
      int64_t pos = b * o.batch_size;
      while (p.rows < o.batch_size && !stop) {
        SampleRng rng = SampleRng::for_sample(o.seed, epoch, static_cast<uint64_t>(pos++));
        bool more = false;
        try {
          more = loader->iterable_->next(row_pointers(p.batch, fields, p.rows), rng);
          if (more) ++p.rows;
        } catch (const CorruptSample& e) {
          if (!o.skip_corrupt) throw;
          p.warnings.push_back(detail::str("[data.DataLoader] skipping a sample: ", e.what()));
          more = true;
        }
        if (!more) break;
      }
      if (p.rows < o.batch_size && o.drop_last) p.rows = 0;
      shrink(p, o.batch_size);
    } catch (...) {
      p.error = std::current_exception();
    }
    return p;
  }

  void publish(int64_t b, Produced p) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ready.emplace(b, std::move(p));
    }
    cv.notify_all();
  }

  void worker_loop() {
    for (;;) {
      int64_t b;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] {
          return stop || stream_done || (total >= 0 && next_claim >= total) ||
                 next_claim < consumed + window();
        });
        if (stop || stream_done || (total >= 0 && next_claim >= total)) return;
        b = next_claim++;
      }
      if (total >= 0) {
        publish(b, produce(b));
        continue;
      }
      Produced p = produce_stream(b);
      const bool last = p.error || p.rows < loader->options_.batch_size;
      publish(b, std::move(p));
      if (last) {
        std::lock_guard<std::mutex> lock(mu);
        stream_done = true;
        cv.notify_all();
        return;
      }
    }
  }

  // The next batch in order, waiting for its worker; nullopt at the end of the epoch.
  std::optional<Produced> take() {
    if (total >= 0 && consumed >= total) return std::nullopt;
    const int64_t b = consumed;
    if (workers.empty()) {
      if (stream_done) return std::nullopt;
      ++consumed;
      Produced p = total >= 0 ? produce(b) : produce_stream(b);
      if (total < 0 && (p.error || p.rows < loader->options_.batch_size)) stream_done = true;
      return p;
    }
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ready.count(b) || (stream_done && b >= next_claim); });
    auto it = ready.find(b);
    if (it == ready.end()) return std::nullopt;
    Produced p = std::move(it->second);
    ready.erase(it);
    ++consumed;
    lock.unlock();
    cv.notify_all();
    return p;
  }
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options,
                       std::shared_ptr<const Sampler> sampler)
    : dataset_(std::move(dataset)), sampler_(std::move(sampler)), options_(std::move(options)) {
  LATHE_CHECK(dataset_, "[data.DataLoader] the dataset is null");
  LATHE_CHECK(options_.batch_size >= 1, "[data.DataLoader] batch_size must be >= 1, got ",
              options_.batch_size);
  LATHE_CHECK(options_.num_workers >= 0, "[data.DataLoader] num_workers must be >= 0, got ",
              options_.num_workers);
  if (!sampler_) {
    if (options_.shuffle)
      sampler_ = std::make_shared<ShuffleSampler>(dataset_->size(), options_.seed);
    else
      sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
  }
  for (int64_t i : sampler_->indices(0))
    LATHE_CHECK(i >= 0 && i < dataset_->size(), "[data.DataLoader] the sampler gave index ", i,
                " outside the dataset's ", dataset_->size(), " samples");
}

DataLoader::DataLoader(std::shared_ptr<IterableDataset> dataset, DataLoaderOptions options)
    : iterable_(std::move(dataset)), options_(std::move(options)) {
  LATHE_CHECK(iterable_, "[data.DataLoader] the dataset is null");
  LATHE_CHECK(options_.batch_size >= 1, "[data.DataLoader] batch_size must be >= 1, got ",
              options_.batch_size);
  LATHE_CHECK(options_.num_workers >= 0, "[data.DataLoader] num_workers must be >= 0, got ",
              options_.num_workers);
}

DataLoader::~DataLoader() = default;

int64_t DataLoader::num_batches() const {
  if (!dataset_) return -1;
  const int64_t n = sampler_->size(), bs = options_.batch_size;
  return options_.drop_last ? n / bs : (n + bs - 1) / bs;
}

void DataLoader::start_epoch(uint64_t epoch) {
  epoch_.reset();
  auto e = std::make_unique<Epoch>();
  e->loader = this;
  e->epoch = epoch;
  if (dataset_) {
    e->fields = dataset_->fields();
    e->order = sampler_->indices(epoch);
    e->total = num_batches();
  } else {
    e->fields = iterable_->fields();
    iterable_->reset(epoch);
    e->total = -1;
  }
  e->progress.total_batches = e->total;
  const int threads = dataset_ ? options_.num_workers : std::min(options_.num_workers, 1);
  for (int i = 0; i < threads; ++i) e->workers.emplace_back([p = e.get()] { p->worker_loop(); });
  epoch_ = std::move(e);
}

std::optional<Batch> DataLoader::next() {
  LATHE_CHECK(epoch_, "[data.DataLoader] next() before start_epoch()");
  for (;;) {
    if (epoch_->failed) return std::nullopt;
    std::optional<Produced> p = epoch_->take();
    if (!p) return std::nullopt;
    for (const std::string& w : p->warnings) {
      if (options_.warn)
        options_.warn(w);
      else
        std::fprintf(stderr, "warning: %s\n", w.c_str());
    }
    if (p->error) {
      epoch_->failed = true;
      std::rethrow_exception(p->error);
    }
    LoaderProgress& pr = epoch_->progress;
    pr.skipped += static_cast<int64_t>(p->warnings.size());
    if (p->rows == 0) continue;  // every sample of it was skipped (or a stream's empty end)
    ++pr.batches;
    pr.samples += p->rows;
    pr.seconds = std::chrono::duration<double>(Clock::now() - epoch_->t0).count();
    const bool last = epoch_->total >= 0 && epoch_->consumed >= epoch_->total;
    if (options_.on_progress && options_.progress_every > 0 &&
        (pr.batches % options_.progress_every == 0 || last))
      options_.on_progress(pr);
    return std::move(p->batch);
  }
}

LoaderProgress DataLoader::progress() const { return epoch_ ? epoch_->progress : LoaderProgress{}; }

}  // namespace lathe::data
