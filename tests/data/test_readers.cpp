#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>

#include "lathe/data/array_dataset.h"
#include "lathe/data/cifar10.h"
#include "lathe/data/data_loader.h"
#include "lathe/data/mnist.h"
#include "lathe/data/npy.h"
#include "lathe/io/safetensors.h"
#include "tests/data/data_test_util.h"

using namespace lathe;
using namespace lathe::data;
using lathe::data::testing::TempDir;
using lathe::data::testing::write_bytes;

namespace {

std::vector<uint8_t> idx_bytes(uint8_t dims_code, const std::vector<uint32_t>& dims,
                               const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b{0, 0, 0x08, dims_code};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

// Three 2x3 images with pixels 10 * i + p and labels 7, 0, 3.
void write_mnist(const TempDir& d, const std::string& stem, bool gz) {
  std::vector<uint8_t> pixels;
  for (int i = 0; i < 3; ++i)
    for (int p = 0; p < 6; ++p) pixels.push_back(static_cast<uint8_t>(10 * i + p));
  const auto images = idx_bytes(3, {3, 2, 3}, pixels), labels = idx_bytes(1, {3}, {7, 0, 3});
  if (gz) {
    write_gz(d.file(stem + "-images-idx3-ubyte.gz"), images);
    write_gz(d.file(stem + "-labels-idx1-ubyte.gz"), labels);
  } else {
    write_bytes(d.file(stem + "-images-idx3-ubyte"), images);
    write_bytes(d.file(stem + "-labels-idx1-ubyte"), labels);
  }
}

std::vector<Tensor> read_sample(const Dataset& ds, int64_t i) {
  std::vector<Tensor> out;
  std::vector<void*> ptrs;
  for (const FieldSpec& f : ds.fields()) {
    out.push_back(empty(Shape(f.shape.begin(), f.shape.end()), f.dtype));
    ptrs.push_back(out.back().raw_data());
  }
  SampleRng rng(0);
  ds.read(i, ptrs, rng);
  return out;
}

}  // namespace

TEST(Mnist, ReadsPlainAndGzippedIdx) {
  for (bool gz : {false, true}) {
    TempDir d;
    write_mnist(d, "train", gz);
    MnistDataset ds = MnistDataset::from_folder(d.str(), true);
    ASSERT_EQ(ds.size(), 3);
    EXPECT_EQ(ds.fields()[0].shape, (std::vector<int64_t>{1, 2, 3}));
    auto s = read_sample(ds, 2);
    EXPECT_FLOAT_EQ(s[0].to_vector<float>()[4], 24.0f / 255.0f);
    EXPECT_EQ(s[1].item(), 3.0);
  }
}

TEST(Mnist, LoaderBatchesTheFile) {
  TempDir d;
  write_mnist(d, "t10k", true);
  MnistOptions o;
  o.mean = 0.5f;
  o.std = 0.25f;
  auto ds = std::make_shared<MnistDataset>(MnistDataset::from_folder(d.str(), false, o));
  DataLoaderOptions lo;
  lo.batch_size = 3;
  DataLoader l(ds, lo);
  l.start_epoch(0);
  auto b = l.next();
  ASSERT_TRUE(b);
  EXPECT_EQ((*b)[0].shape(), (std::vector<int64_t>{3, 1, 2, 3}));
  EXPECT_EQ((*b)[1].to_vector<int64_t>(), (std::vector<int64_t>{7, 0, 3}));
  EXPECT_FLOAT_EQ((*b)[0].to_vector<float>()[7], (11.0f / 255.0f - 0.5f) / 0.25f);
}

TEST(Mnist, BadFilesNameTheFileAndTheProblem) {
  TempDir d;
  write_bytes(d.file("short"), idx_bytes(3, {3, 2, 3}, {1, 2, 3}));
  EXPECT_ERROR_HAS(read_idx(d.file("short"), 3), "short is truncated", "need 18 bytes");
  write_bytes(d.file("magic"), {0x1f, 0x00, 0x08, 0x03, 0, 0, 0, 0});
  EXPECT_ERROR_HAS(read_idx(d.file("magic"), 3), "magic", "wrong magic");
  write_bytes(d.file("dims"), idx_bytes(1, {3}, {1, 2, 3}));
  EXPECT_ERROR_HAS(read_idx(d.file("dims"), 3), "has 1 dimensions, expected 3");
  write_bytes(d.file("bad.gz"), {0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3, 0xde, 0xad});
  EXPECT_ERROR_HAS(read_idx(d.file("bad.gz"), 1), "bad.gz", "gzip");
  EXPECT_ERROR_HAS(MnistDataset::from_folder(d.str(), true), "no train-images-idx3-ubyte file");
}

TEST(Mnist, LabelOutOfRangeIsACorruptSample) {
  TempDir d;
  write_bytes(d.file("i"), idx_bytes(3, {2, 1, 1}, {0, 0}));
  write_bytes(d.file("l"), idx_bytes(1, {2}, {1, 12}));
  MnistDataset ds(d.file("i"), d.file("l"));
  const std::string labels = d.file("l") + ": label 12";
  EXPECT_ERROR_HAS(read_sample(ds, 1), "label 12 of sample 1 is out of range [0, 10)",
                   labels.c_str());
  EXPECT_EQ(read_sample(ds, 0)[1].item(), 1.0);
}

TEST(Cifar10, ReadsRecordsAcrossBatchFiles) {
  TempDir d;
  for (int f = 1; f <= 5; ++f) {
    std::vector<uint8_t> b;
    for (int r = 0; r < 2; ++r) {
      b.push_back(static_cast<uint8_t>((f + r) % 10));
      for (int i = 0; i < 3072; ++i) b.push_back(static_cast<uint8_t>((i / 1024) * 100 + f));
    }
    write_bytes(d.file(detail::str("data_batch_", f, ".bin")), b);
  }
  Cifar10Dataset ds = Cifar10Dataset::from_folder(d.str(), true);
  ASSERT_EQ(ds.size(), 10);
  auto s = read_sample(ds, 5);  // file 3, record 1
  EXPECT_EQ(s[1].item(), 4.0);
  const auto px = s[0].to_vector<float>();
  EXPECT_FLOAT_EQ(px[0], 3.0f / 255.0f);
  EXPECT_FLOAT_EQ(px[2048], 203.0f / 255.0f);
}

TEST(Cifar10, TruncatedFileAndBadLabel) {
  TempDir d;
  write_bytes(d.file("t.bin"), std::vector<uint8_t>(3073 + 100, 1));
  EXPECT_ERROR_HAS(Cifar10Dataset({d.file("t.bin")}), "t.bin is truncated", "last has 100 bytes");
  std::vector<uint8_t> b(3073 * 2, 0);
  b[3073] = 11;
  write_bytes(d.file("l.bin"), b);
  Cifar10Dataset ds({d.file("l.bin")});
  EXPECT_ERROR_HAS(read_sample(ds, 1), "l.bin: label 11 of record 1", "out of range");
  EXPECT_ERROR_HAS(Cifar10Dataset::from_folder(d.str(), false), "test_batch.bin does not exist");
}

namespace {

std::vector<uint8_t> npy_bytes(const std::string& descr, const std::string& shape, const void* data,
                               size_t nbytes, int version = 1) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t pre = version == 1 ? 10 : 12;
  while ((pre + dict.size() + 1) % 64) dict += ' ';
  dict += '\n';
  std::vector<uint8_t> b = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(version), 0};
  const size_t len = dict.size();
  b.push_back(static_cast<uint8_t>(len));
  b.push_back(static_cast<uint8_t>(len >> 8));
  if (version > 1) b.insert(b.end(), {0, 0});
  b.insert(b.end(), dict.begin(), dict.end());
  const auto* p = static_cast<const uint8_t*>(data);
  b.insert(b.end(), p, p + nbytes);
  return b;
}

}  // namespace

TEST(Npy, LoadsSeveralDtypesAndShapes) {
  TempDir d;
  const float f[6] = {1.5f, -2, 3, 4, 5, 6.25f};
  write_bytes(d.file("f.npy"), npy_bytes("<f4", "(2, 3)", f, sizeof(f)));
  Tensor tf = load_npy(d.file("f.npy"));
  EXPECT_EQ(tf.dtype(), DType::f32);
  EXPECT_EQ(tf.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(tf.to_vector<float>(), std::vector<float>(f, f + 6));

  const int64_t l[4] = {9, -8, 7, 1LL << 40};
  write_bytes(d.file("l.npy"), npy_bytes("<i8", "(4,)", l, sizeof(l), 2));
  EXPECT_EQ(load_npy(d.file("l.npy")).to_vector<int64_t>(), std::vector<int64_t>(l, l + 4));

  const uint16_t tok[4] = {0, 65535, 3, 50000};
  write_bytes(d.file("u.npy"), npy_bytes("<u2", "(2, 2)", tok, sizeof(tok)));
  Tensor tu = load_npy(d.file("u.npy"));
  EXPECT_EQ(tu.dtype(), DType::i32);
  EXPECT_EQ(tu.to_vector<int64_t>(), (std::vector<int64_t>{0, 65535, 3, 50000}));

  const double s = 2.5;
  write_bytes(d.file("s.npy"), npy_bytes("<f8", "()", &s, sizeof(s), 3));
  Tensor ts = load_npy(d.file("s.npy"));
  EXPECT_EQ(ts.dim(), 0);
  EXPECT_EQ(ts.item(), 2.5);
}

TEST(Npy, BadHeadersAreClearErrors) {
  TempDir d;
  const float f[2] = {1, 2};
  auto good = npy_bytes("<f4", "(2,)", f, sizeof(f));
  auto magic = good;
  magic[1] = 'X';
  write_bytes(d.file("m.npy"), magic);
  EXPECT_ERROR_HAS(load_npy(d.file("m.npy")), "m.npy has a wrong magic");
  write_bytes(d.file("t.npy"), std::vector<uint8_t>(good.begin(), good.end() - 3));
  EXPECT_ERROR_HAS(load_npy(d.file("t.npy")), "t.npy is truncated", "needs 8 bytes");
  write_bytes(d.file("b.npy"), npy_bytes(">f4", "(2,)", f, sizeof(f)));
  EXPECT_ERROR_HAS(load_npy(d.file("b.npy")), "dtype '>f4' is not supported");
  std::string h = "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }";
  std::vector<uint8_t> fo = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<uint8_t>(h.size()),
                             0};
  fo.insert(fo.end(), h.begin(), h.end());
  write_bytes(d.file("fo.npy"), fo);
  EXPECT_ERROR_HAS(load_npy(d.file("fo.npy")), "fortran_order True is not supported");
  write_bytes(d.file("n.npy"), {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 200, 0, '{'});
  EXPECT_ERROR_HAS(load_npy(d.file("n.npy")), "the header claims 200 bytes");
  EXPECT_ERROR_HAS(load_npy(d.file("missing.npy")), "cannot open", "missing.npy");
}

TEST(ArrayDataset, NpyAndSafetensorsColumns) {
  TempDir d;
  const float x[6] = {0, 1, 2, 3, 4, 5};
  const int32_t y[3] = {2, 0, 1};
  write_bytes(d.file("x.npy"), npy_bytes("<f4", "(3, 2)", x, sizeof(x)));
  write_bytes(d.file("y.npy"), npy_bytes("<i4", "(3,)", y, sizeof(y)));
  ArrayDataset a = ArrayDataset::from_npy({{"x", d.file("x.npy")}, {"y", d.file("y.npy")}});
  ASSERT_EQ(a.size(), 3);
  auto s = read_sample(a, 2);
  EXPECT_EQ(s[0].to_vector<float>(), (std::vector<float>{4, 5}));
  EXPECT_EQ(s[1].item(), 1.0);

  io::save_safetensors(d.file("t.safetensors"),
                       {{"tokens", from_vector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2})},
                        {"w", from_vector<float>({.5f, 1.5f, 2.5f, 3.5f}, {4})}});
  ArrayDataset st = ArrayDataset::from_safetensors(d.file("t.safetensors"), {"tokens", "w"});
  auto r = read_sample(st, 3);
  EXPECT_EQ(r[0].to_vector<int64_t>(), (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(r[1].item(), 3.5);
  EXPECT_ERROR_HAS(ArrayDataset::from_safetensors(d.file("t.safetensors"), {"nope"}),
                   "has no tensor 'nope'");
  EXPECT_ERROR_HAS(ArrayDataset({{"a", zeros({3})}, {"b", zeros({4})}}),
                   "array 'b' has 4 rows, array 'a' has 3");
}
