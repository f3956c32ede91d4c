#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "lathe/data/data_loader.h"
#include "tests/data/data_test_util.h"

using namespace lathe;
using namespace lathe::data;

namespace {

// Sample i: x = [i, a random draw of its generator], y = i; throws at `bad` (CorruptSample when
// `corrupt`, else a plain Error), sleeps `delay_ms` per sample.
class CountingDataset : public Dataset {
 public:
  explicit CountingDataset(int64_t n, int64_t bad = -1, bool corrupt = false, int delay_ms = 0)
      : n_(n), bad_(bad), corrupt_(corrupt), delay_ms_(delay_ms) {}
  int64_t size() const override { return n_; }
  std::vector<FieldSpec> fields() const override {
    return {{"x", {2}, DType::f32}, {"y", {}, DType::i64}};
  }
  int64_t reads() const { return reads_; }
  void read(int64_t i, const std::vector<void*>& out, SampleRng& rng) const override {
    ++reads_;
    if (delay_ms_) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    if (i == bad_) {
      if (corrupt_) throw CorruptSample(detail::str("sample ", i, " is broken"));
      throw Error(detail::str("[test] cannot read sample ", i));
    }
    auto* x = static_cast<float*>(out[0]);
    x[0] = static_cast<float>(i);
    x[1] = static_cast<float>(rng.uniform());
    *static_cast<int64_t*>(out[1]) = i;
  }

 private:
  int64_t n_, bad_;
  bool corrupt_;
  int delay_ms_;
  mutable std::atomic<int64_t> reads_{0};
};

std::vector<std::vector<float>> run_epoch(DataLoader& loader, uint64_t epoch) {
  std::vector<std::vector<float>> out;
  loader.start_epoch(epoch);
  while (auto b = loader.next()) out.push_back((*b)[0].to_vector<float>());
  return out;
}

DataLoaderOptions opts(int64_t batch, int workers, bool shuffle = true) {
  DataLoaderOptions o;
  o.batch_size = batch;
  o.num_workers = workers;
  o.shuffle = shuffle;
  o.seed = 42;
  return o;
}

}  // namespace

TEST(DataLoader, SameBatchesWhateverTheNumberOfWorkers) {
  auto ds = std::make_shared<CountingDataset>(37);
  DataLoader ref(ds, opts(5, 0));
  const auto e0 = run_epoch(ref, 0), e1 = run_epoch(ref, 1);
  ASSERT_EQ(e0.size(), 8u);  // 7 full + 2 left over
  EXPECT_NE(e0, e1);
  for (int w : {1, 2, 4}) {
    DataLoader l(ds, opts(5, w));
    EXPECT_EQ(run_epoch(l, 0), e0) << w << " workers";
    EXPECT_EQ(run_epoch(l, 1), e1) << w << " workers";
  }
}

TEST(DataLoader, CollatesShapesAndDtypes) {
  DataLoader l(std::make_shared<CountingDataset>(10), opts(4, 2, false));
  l.start_epoch(0);
  auto b = l.next();
  ASSERT_TRUE(b);
  ASSERT_EQ(b->size(), 2u);
  EXPECT_EQ((*b)[0].shape(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ((*b)[0].dtype(), DType::f32);
  EXPECT_EQ((*b)[1].shape(), (std::vector<int64_t>{4}));
  EXPECT_EQ((*b)[1].dtype(), DType::i64);
  EXPECT_EQ((*b)[1].to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(l.num_batches(), 3);
}

TEST(DataLoader, DropLastDropsTheShortBatch) {
  for (bool drop : {false, true}) {
    DataLoaderOptions o = opts(4, 2, false);
    o.drop_last = drop;
    DataLoader l(std::make_shared<CountingDataset>(10), o);
    const auto batches = run_epoch(l, 0);
    ASSERT_EQ(batches.size(), drop ? 2u : 3u);
    EXPECT_EQ(batches.back().size(), drop ? 8u : 4u);  // [rows, 2] flattened
    EXPECT_EQ(l.num_batches(), drop ? 2 : 3);
  }
}

TEST(DataLoader, WorkerErrorSurfacesInTheCallerWithItsMessage) {
  for (int w : {0, 1, 3}) {
    DataLoader l(std::make_shared<CountingDataset>(20, 13), opts(4, w, false));
    l.start_epoch(0);
    int good = 0;
    EXPECT_ERROR_HAS(while (l.next())++ good, "[test] cannot read sample 13");
    EXPECT_EQ(good, 3) << w << " workers";  // batches 0..2 come out before the failing one
    EXPECT_FALSE(l.next());                 // the epoch ends at the error
    l.start_epoch(1);                       // and the next one starts afresh
    EXPECT_TRUE(l.next());
  }
}

TEST(DataLoader, CorruptSampleStopsUnlessSkipped) {
  DataLoader strict(std::make_shared<CountingDataset>(10, 6, true), opts(4, 2, false));
  strict.start_epoch(0);
  EXPECT_ERROR_HAS(while (strict.next()){}, "sample 6 is broken");

  DataLoaderOptions o = opts(4, 2, false);
  o.skip_corrupt = true;
  std::vector<std::string> warnings;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  DataLoader l(std::make_shared<CountingDataset>(10, 6, true), o);
  l.start_epoch(0);
  std::vector<int64_t> seen;
  while (auto b = l.next())
    for (int64_t y : (*b)[1].to_vector<int64_t>()) seen.push_back(y);
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 7, 8, 9}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("skipping sample 6: sample 6 is broken"), std::string::npos)
      << warnings[0];
  EXPECT_EQ(l.progress().skipped, 1);
}

TEST(DataLoader, DestroyingMidEpochDoesNotHang) {
  auto ds = std::make_shared<CountingDataset>(1000, -1, false, 1);
  {
    DataLoader l(ds, opts(8, 4));
    l.start_epoch(0);
    ASSERT_TRUE(l.next());
  }  // joins the workers (a hang would stop the test here, under CTest's timeout)
  // Workers stay within the prefetch window: one batch taken, 4 workers x 2 batches ahead of
  // it, so at most batches 0..8 were ever claimed, not the epoch's 125.
  EXPECT_GT(ds->reads(), 0);
  EXPECT_LE(ds->reads(), 9 * 8);
}

TEST(DataLoader, ProgressCountsTheEpoch) {
  DataLoaderOptions o = opts(3, 2, false);
  o.progress_every = 2;
  std::vector<int64_t> reported;
  o.on_progress = [&](const LoaderProgress& p) { reported.push_back(p.batches); };
  DataLoader l(std::make_shared<CountingDataset>(14), o);
  run_epoch(l, 0);
  EXPECT_EQ(reported, (std::vector<int64_t>{2, 4, 5}));
  const LoaderProgress p = l.progress();
  EXPECT_EQ(p.samples, 14);
  EXPECT_EQ(p.total_batches, 5);
  EXPECT_NE(p.format().find("batch 5/5  14 samples"), std::string::npos) << p.format();
}

TEST(DataLoader, CustomSamplerShardsTheData) {
  auto ds = std::make_shared<CountingDataset>(10);
  auto sampler = std::make_shared<DistributedSampler>(10, DistributedSamplerOptions{1, 2, false});
  DataLoader l(ds, opts(10, 2), sampler);
  l.start_epoch(0);
  auto b = l.next();
  ASSERT_TRUE(b);
  EXPECT_EQ((*b)[1].to_vector<int64_t>(), (std::vector<int64_t>{1, 3, 5, 7, 9}));
  EXPECT_FALSE(l.next());
}

namespace {
// A stream of 0..n-1.
class CountingStream : public IterableDataset {
 public:
  explicit CountingStream(int64_t n) : n_(n) {}
  std::vector<FieldSpec> fields() const override { return {{"y", {}, DType::i64}}; }
  void reset(uint64_t) override { i_ = 0; }
  bool next(const std::vector<void*>& out, SampleRng&) override {
    if (i_ >= n_) return false;
    *static_cast<int64_t*>(out[0]) = i_++;
    return true;
  }

 private:
  int64_t n_, i_ = 0;
};
}  // namespace

TEST(DataLoader, IterableDatasetBatchesTheStream) {
  for (int w : {0, 2}) {
    for (bool drop : {false, true}) {
      DataLoaderOptions o = opts(4, w, false);
      o.drop_last = drop;
      DataLoader l(std::make_shared<CountingStream>(10), o);
      for (uint64_t epoch : {0u, 1u}) {
        l.start_epoch(epoch);
        std::vector<int64_t> seen;
        int batches = 0;
        while (auto b = l.next()) {
          ++batches;
          for (int64_t y : (*b)[0].to_vector<int64_t>()) seen.push_back(y);
        }
        EXPECT_EQ(batches, drop ? 2 : 3);
        EXPECT_EQ(seen.size(), drop ? 8u : 10u);
        EXPECT_EQ(seen.front(), 0);
      }
    }
  }
}
