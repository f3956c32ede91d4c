// Fuzz: hundreds of corrupted variants of valid files (fixed seed). Every load must either be
// rejected with a lathe::Error or open with exactly the contents a strict reading of the file
// gives (model_read below: names, dtypes, shapes, bytes and metadata); variants that only
// corrupt a file (truncations, inserted junk, header-length edits, NUL and non-UTF-8 bytes) must
// be rejected or read exactly as the original. Never a crash, an out-of-bounds read or another
// exception. Run it under -DLATHE_ASAN=ON too (docs/safetensors.md). Test names contain "Fuzz"
// so CI can select them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "lathe/io/safetensors.h"
#include "lathe/io/untrusted_text.h"
#include "tests/io/io_test_util.h"

// In a -DLATHE_ASAN=ON build, make UBSan findings fatal so they fail the test instead of only
// printing (harmless in other builds: nothing calls it).
extern "C" __attribute__((used, visibility("default"))) const char* __ubsan_default_options() {
  return "halt_on_error=1:print_stacktrace=1";
}

namespace lathe::io {
namespace {

using json = nlohmann::json;
using testing::length_prefix;
using testing::make_file;
using testing::random_tensor;
using testing::read_bytes;
using testing::write_bytes;

struct Outcome {
  int loaded = 0;    // every tensor loaded
  int partly = 0;    // the header is valid, some tensor threw lathe::Error (a bad bool byte)
  int rejected = 0;  // lathe::Error on open
};
enum class Result { loaded, partly, rejected };

uint64_t header_len_of(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  return n;
}

// What a file holds: every tensor's dtype, shape and bytes, and the metadata.
struct Contents {
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    std::string bytes;
    bool operator==(const Entry&) const = default;
  };
  std::map<std::string, Entry> tensors;
  std::map<std::string, std::string> metadata;
  bool operator==(const Contents&) const = default;
};

size_t model_itemsize(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8},     {"C64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

// One header entry read strictly by the format's rules into c; false when it breaks one.
bool model_entry(const json& v, const std::string& data, Contents::Entry* e,
                 std::pair<uint64_t, uint64_t>* span) {
  if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string()) return false;
  e->dtype = v["dtype"].get<std::string>();
  const size_t item = model_itemsize(e->dtype);
  const json& shape = v.contains("shape") ? v["shape"] : json();
  const json& off = v.contains("data_offsets") ? v["data_offsets"] : json();
  if (item == 0 || !shape.is_array() || shape.size() > 64 || !off.is_array() || off.size() != 2)
    return false;
  unsigned __int128 bound = item, numel = 1;
  for (const json& d : shape) {
    if (!d.is_number_unsigned()) return false;  // "-0" parses as a signed number
    uint64_t n = d.get<uint64_t>();
    bound *= std::max<uint64_t>(n, 1);
    if (n > uint64_t{1} << 62 || bound > uint64_t{1} << 62) return false;
    numel *= n;
    e->shape.push_back(static_cast<int64_t>(n));
  }
  if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) return false;
  *span = {off[0].get<uint64_t>(), off[1].get<uint64_t>()};
  if (span->first > span->second || span->second > data.size() ||
      span->second - span->first != numel * item)
    return false;
  e->bytes = data.substr(span->first, span->second - span->first);
  return true;
}

// The contents of a file read strictly by the format's rules, independently of the loader (a
// plain DOM parse): a UTF-8 JSON header with nothing else in it (no NUL, no BOM), entries as
// the format defines them, tensors tiling the data section. nullopt when the file breaks a rule.
// The loader may refuse more (duplicate keys, which a DOM cannot see), never less.
std::optional<Contents> model_read(const std::string& bytes) {
  if (bytes.size() < 8) return std::nullopt;
  const uint64_t n = header_len_of(bytes);
  if (n > 100'000'000 || n > bytes.size() - 8) return std::nullopt;
  const std::string header = bytes.substr(8, n), data = bytes.substr(8 + n);
  if (header.find('\0') != std::string::npos || header.rfind("\xEF\xBB\xBF", 0) == 0)
    return std::nullopt;
  json h = json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (h.is_discarded() || !h.is_object()) return std::nullopt;
  Contents c;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& [key, v] : h.items()) {
    if (key == "__metadata__") {
      if (v.is_null()) continue;
      if (!v.is_object()) return std::nullopt;
      for (const auto& [mk, mv] : v.items()) {
        if (!mv.is_string()) return std::nullopt;
        c.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    spans.emplace_back();
    if (!model_entry(v, data, &c.tensors[key], &spans.back())) return std::nullopt;
  }
  std::sort(spans.begin(), spans.end());
  uint64_t cursor = 0;
  for (const auto& [b, e] : spans) {
    if (b != cursor) return std::nullopt;
    cursor = e;
  }
  if (cursor != data.size()) return std::nullopt;
  return c;
}

// A short printable description of a variant for failure messages.
std::string describe(const std::string& bytes) {
  return lathe::detail::printable(bytes.substr(0, std::min<size_t>(bytes.size(), 400)), 400);
}

class SafetensorsFuzz : public testing::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    // A file saved by Lathe: every native dtype, views, 0-d, empty, metadata.
    std::map<std::string, Tensor> tensors = {
        {"w", random_tensor({4, 3}, DType::f32, 1).t()},
        {"d", random_tensor({5}, DType::f64, 2)},
        {"idx", random_tensor({2, 2}, DType::i64, 3)},
        {"n", random_tensor({3}, DType::i32, 4)},
        {"mask", random_tensor({6}, DType::b8, 5)},
        {"s", from_vector(std::vector<float>{0.5f}, {})},
        {"e", empty({0, 2}, DType::f32)},
    };
    save_safetensors(path("base.safetensors"), tensors, {{"format", "pt"}, {"k", "v"}});
    bases_.push_back(read_bytes(path("base.safetensors")));
    // A hand-made file with the 16-bit floats (F16/BF16) and a misaligned I32 (copied).
    std::string header = R"({"h":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[8,14]},)"
                         R"("i":{"dtype":"I32","shape":[2],"data_offsets":[14,22]},)"
                         R"("__metadata__":{"x":"y"}})";
    std::string data;
    std::mt19937 rng(9);
    for (int i = 0; i < 22; ++i) data.push_back(static_cast<char>(rng() & 0x3f));
    bases_.push_back(make_file(header, data));
    for (const std::string& b : bases_) {
      std::optional<Contents> c = model_read(b);
      ASSERT_TRUE(c.has_value()) << describe(b);
      originals_.push_back(*c);
    }
  }

  // Loads one variant and checks the contract; counts the outcome. With `original`, the
  // variant only corrupts that file: it must be rejected or read exactly as the original.
  void check_variant(const std::string& bytes, Outcome& out, const Contents* original = nullptr) {
    std::string p = path("fuzz.safetensors");
    write_bytes(p, bytes);
    std::optional<Contents> opened;
    Result r = check_file(p, bytes, &opened);
    if (opened) {
      std::optional<Contents> want =
          original ? std::optional<Contents>(*original) : model_read(bytes);
      if (!want)
        ADD_FAILURE() << "the loader opened a file that breaks the format: " << describe(bytes);
      else
        EXPECT_TRUE(*opened == *want)
            << "the loader read other contents than the file holds: " << describe(bytes);
    }
    bool ok_all = true;
    try {
      auto all = load_safetensors(p);
      for (const auto& kv : all) touch(kv.second);
    } catch (const Error&) {
      ok_all = false;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "load_safetensors threw a non-lathe exception: " << e.what();
      ok_all = false;
    }
    EXPECT_EQ(r == Result::loaded, ok_all) << "SafetensorsFile and load_safetensors disagree";
    (r == Result::loaded ? out.loaded : r == Result::partly ? out.partly : out.rejected)++;
  }

  // SafetensorsFile + get() on every key, checking each tensor against the file's bytes; the
  // contents the loader read go to *opened.
  Result check_file(const std::string& p, const std::string& bytes,
                    std::optional<Contents>* opened) {
    std::unique_ptr<SafetensorsFile> file;
    try {
      file = std::make_unique<SafetensorsFile>(p);
    } catch (const Error&) {
      return Result::rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw a non-lathe exception: " << e.what();
      return Result::rejected;
    }
    const SafetensorsFile& f = *file;
    const std::string data = bytes.substr(8 + header_len_of(bytes));
    Contents c;
    c.metadata = f.metadata();
    bool all = true;
    for (const std::string& key : f.keys()) {
      const TensorInfo& info = f.info(key);
      c.tensors[key] = {info.dtype, info.shape,
                        info.end <= data.size() ? data.substr(info.begin, info.end - info.begin)
                                                : std::string("<past the end>")};
      try {
        check_tensor(f, key, bytes);
      } catch (const Error&) {
        all = false;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "get('" << key << "') threw a non-lathe exception: " << e.what();
        all = false;
      }
    }
    *opened = std::move(c);
    return all ? Result::loaded : Result::partly;
  }

  void check_tensor(const SafetensorsFile& f, const std::string& key, const std::string& bytes) {
    uint64_t n = header_len_of(bytes);
    EXPECT_LE(8 + n, bytes.size());
    const uint64_t data_size = bytes.size() - 8 - n;
    const TensorInfo& info = f.info(key);
    EXPECT_LE(info.begin, info.end);
    EXPECT_LE(info.end, data_size) << key;
    Tensor t = f.get(key);
    touch(t);
    const size_t span = info.end - info.begin;
    EXPECT_EQ(t.nbytes(), span) << key;
    // The tensor holds exactly the file's bytes at its offsets.
    if (span) {
      EXPECT_EQ(std::memcmp(t.raw_data(), bytes.data() + 8 + n + info.begin, span), 0) << key;
    }
  }

  // Reads every element (out-of-bounds reads show up under ASan, bad bools under UBSan).
  static void touch(const Tensor& t) {
    if (t.dtype() == DType::b8) {
      auto v = t.to_vector<bool>();
      EXPECT_EQ(static_cast<int64_t>(v.size()), t.numel());
    } else {
      auto v = t.to_vector<double>();
      EXPECT_EQ(static_cast<int64_t>(v.size()), t.numel());
    }
  }

  void report(const Outcome& o, int variants) {
    EXPECT_EQ(o.loaded + o.partly + o.rejected, variants);
    std::cout << "  " << variants << " variants: " << o.loaded << " loaded, " << o.partly
              << " opened with some tensors rejected, " << o.rejected << " rejected on open\n";
  }

  std::vector<std::string> bases_;
  std::vector<Contents> originals_;  // model_read(bases_[i])
  std::mt19937_64 rng_{20240601};
  size_t pick(size_t n) { return static_cast<size_t>(rng_() % n); }
};

TEST_F(SafetensorsFuzz, HeaderByteFlips) {
  Outcome o;
  const int kVariants = 200;
  for (int i = 0; i < kVariants; ++i) {
    std::string b = bases_[i % bases_.size()];
    uint64_t n = header_len_of(b);
    int flips = 1 + static_cast<int>(pick(4));
    for (int k = 0; k < flips; ++k) {
      size_t at = 8 + pick(n);
      if (rng_() & 1)
        b[at] = static_cast<char>(b[at] ^ (1 << pick(8)));
      else
        b[at] = "0123456789-.,:[]{}\"eE \\x"[pick(25)];
    }
    check_variant(b, o);
  }
  report(o, kVariants);
  EXPECT_GT(o.rejected, 0);
}

TEST_F(SafetensorsFuzz, DataByteFlips) {
  Outcome o;
  const int kVariants = 100;
  for (int i = 0; i < kVariants; ++i) {
    std::string b = bases_[i % bases_.size()];
    size_t start = 8 + header_len_of(b);
    for (int k = 0; k < 3; ++k) {
      size_t at = start + pick(b.size() - start);
      b[at] = static_cast<char>(rng_());
    }
    check_variant(b, o);
  }
  report(o, kVariants);
  // Flipped float/int bytes still load; flipped bool bytes are rejected; the header is intact.
  EXPECT_GT(o.loaded, 0);
  EXPECT_GT(o.partly, 0);
  EXPECT_EQ(o.rejected, 0);
}

TEST_F(SafetensorsFuzz, TruncationsAndExtensions) {
  Outcome o;
  int variants = 0;
  for (const std::string& base : bases_) {
    const Contents& original = originals_[&base - bases_.data()];
    for (size_t len = 0; len <= base.size(); len += 1 + pick(5), ++variants)
      check_variant(base.substr(0, len), o, &original);
    for (int k = 0; k < 10; ++k, ++variants) {
      std::string b = base;
      b.insert(pick(b.size() + 1), std::string(1 + pick(16), static_cast<char>(rng_())));
      check_variant(b, o, &original);
    }
  }
  report(o, variants);
  EXPECT_GT(o.rejected, variants / 2);
}

TEST_F(SafetensorsFuzz, HeaderLengthEdits) {
  Outcome o;
  const int kVariants = 120;
  for (int i = 0; i < kVariants; ++i) {
    std::string b = bases_[i % bases_.size()];
    uint64_t n = header_len_of(b);
    const uint64_t choices[] = {0,
                                1,
                                n - 1,
                                n + 1,
                                n + 8,
                                b.size() - 8,
                                b.size() - 7,
                                b.size(),
                                100'000'000,
                                100'000'001,
                                ~uint64_t{0},
                                uint64_t{1} << 63,
                                rng_(),
                                n ^ (uint64_t{1} << pick(64))};
    uint64_t len = choices[pick(std::size(choices))];
    b.replace(0, 8, length_prefix(len));
    check_variant(b, o, &originals_[i % bases_.size()]);
  }
  report(o, kVariants);
  EXPECT_GT(o.rejected, kVariants / 2);
}

// A random JSON value of a random type, including the awkward ones.
json random_value(std::mt19937_64& rng) {
  switch (rng() % 12) {
    case 0:
      return nullptr;
    case 1:
      return true;
    case 2:
      return static_cast<int64_t>(rng() % 64) - 8;
    case 3:
      return -static_cast<int64_t>(rng() >> 2);
    case 4:
      return rng();  // up to 2^64-1
    case 5:
      return 2.5;
    case 6:
      return 1e300;
    case 7:
      return "F32";
    case 8:
      return "I8";
    case 9:
      return json::array({static_cast<int64_t>(rng() % 40), static_cast<int64_t>(rng() % 40)});
    case 10:
      return json::array({1, 2, 3});
    default:
      return json::object({{"a", 1}});
  }
}

TEST_F(SafetensorsFuzz, JsonMutations) {
  Outcome o;
  const int kVariants = 250;
  const char* dtypes[] = {"F32", "F64", "I64", "I32", "BOOL", "F16", "BF16", "U8",
                          "I8",  "U16", "U64", "C64", "F4",   "f32", ""};
  for (int i = 0; i < kVariants; ++i) {
    const std::string& base = bases_[i % bases_.size()];
    uint64_t n = header_len_of(base);
    std::string data = base.substr(8 + n);
    json h = json::parse(base.substr(8, n));
    std::vector<std::string> keys;
    for (const auto& kv : h.items()) keys.push_back(kv.key());
    std::string key = keys[pick(keys.size())];
    json& e = h[key];
    const char* fields[] = {"dtype", "shape", "data_offsets"};
    std::string field = fields[pick(3)];
    switch (pick(9)) {
      case 0:
        e[field] = random_value(rng_);
        break;
      case 1:
        e.erase(field);
        break;
      case 2:
        e["dtype"] = dtypes[pick(std::size(dtypes))];
        break;
      case 3:  // nudge a shape dim
        if (e.contains("shape") && e["shape"].is_array() && !e["shape"].empty())
          e["shape"][pick(e["shape"].size())] = static_cast<int64_t>(pick(6)) - 1;
        else
          e["shape"] = json::array({3, 0});
        break;
      case 4:  // add or drop a dim
        if (e.contains("shape") && e["shape"].is_array()) {
          if (rng_() & 1)
            e["shape"].push_back(static_cast<int64_t>(pick(3)));
          else if (!e["shape"].empty())
            e["shape"].erase(e["shape"].size() - 1);
        }
        break;
      case 5:  // shift or resize offsets
        if (e.contains("data_offsets") && e["data_offsets"].is_array() &&
            e["data_offsets"].size() == 2) {
          int64_t delta = static_cast<int64_t>(pick(17)) - 8;
          size_t which = pick(3);
          for (size_t j = 0; j < 2; ++j)
            if (which == 2 || which == j)
              e["data_offsets"][j] = e["data_offsets"][j].get<int64_t>() + delta;
        }
        break;
      case 6:
        h[key + "_copy"] = e;
        break;  // aliasing tensor
      case 7:
        h[key] = random_value(rng_);
        break;
      default:
        h["__metadata__"] = (rng_() & 1) ? random_value(rng_) : json::object({{"k", 1}});
        break;
    }
    std::string text = h.dump();
    if (rng_() % 4 == 0) {
      // A textual duplicate key, which the DOM cannot express.
      size_t brace = text.find('{', 1);
      if (brace != std::string::npos) text.insert(brace + 1, "\"dtype\":\"F32\",");
    }
    check_variant(make_file(text, data), o);
  }
  report(o, kVariants);
  EXPECT_GT(o.loaded, 0);
  EXPECT_GT(o.rejected, kVariants / 2);
}

TEST_F(SafetensorsFuzz, NumberEditsInHeaderText) {
  // Rewrites a random number of the header text (dims and offsets) in place, then fixes or
  // keeps the length prefix.
  Outcome o;
  const int kVariants = 150;
  const char* replacements[] = {
      "0",   "1",   "7",  "-1", "4294967296", "18446744073709551615", "99999999999999999999999",
      "1e3", "2.0", "16", "8",  "65536"};
  for (int i = 0; i < kVariants; ++i) {
    const std::string& base = bases_[i % bases_.size()];
    uint64_t n = header_len_of(base);
    std::string header = base.substr(8, n), data = base.substr(8 + n);
    std::vector<std::pair<size_t, size_t>> numbers;  // [start, end) of digit runs
    for (size_t j = 0; j < header.size();) {
      if (std::isdigit(static_cast<unsigned char>(header[j]))) {
        size_t k = j;
        while (k < header.size() && std::isdigit(static_cast<unsigned char>(header[k]))) ++k;
        numbers.emplace_back(j, k);
        j = k;
      } else {
        ++j;
      }
    }
    ASSERT_FALSE(numbers.empty());
    auto [s, e] = numbers[pick(numbers.size())];
    std::string rep =
        (rng_() & 1) ? replacements[pick(std::size(replacements))] : std::to_string(pick(200));
    header.replace(s, e - s, rep);
    std::string b = make_file(header, data);
    if (rng_() % 5 == 0) b.replace(0, 8, length_prefix(n));  // stale length
    check_variant(b, o);
  }
  report(o, kVariants);
  EXPECT_GT(o.rejected, 0);
}

TEST_F(SafetensorsFuzz, NulAndNonUtf8BytesInHeader) {
  // The JSON lexer stops at a NUL: whatever follows one (junk, a second JSON naming other
  // tensors) must not go unread. A byte order mark or any non-UTF-8 byte is refused too.
  Outcome o;
  const int kVariants = 150;
  for (int i = 0; i < kVariants; ++i) {
    const std::string& base = bases_[i % bases_.size()];
    uint64_t n = header_len_of(base);
    std::string header = base.substr(8, n), data = base.substr(8 + n);
    switch (pick(4)) {
      case 0: {  // a NUL and random junk anywhere, or right after the JSON
        std::string junk(1, '\0');
        for (size_t k = pick(32); k > 0; --k) junk.push_back(static_cast<char>(rng_()));
        header.insert((rng_() & 1) ? header.rfind('}') + 1 : pick(header.size() + 1), junk);
        break;
      }
      case 1:  // a NUL and a second header naming another tensor
        header.insert(
            header.rfind('}') + 1,
            std::string(1, '\0') + R"({"other":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})");
        break;
      case 2:  // one byte replaced by a byte that cannot stand alone in UTF-8
        header[pick(header.size())] = static_cast<char>(0x80 + pick(128));
        break;
      default:
        header.insert(0, "\xEF\xBB\xBF");
        break;
    }
    check_variant(make_file(header, data), o, &originals_[i % bases_.size()]);
  }
  report(o, kVariants);
  EXPECT_EQ(o.rejected, kVariants);
}

}  // namespace
}  // namespace lathe::io
