#include "lathe/io/safetensors_header.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "lathe/core/error.h"
#include "lathe/io/untrusted_text.h"

namespace lathe::detail {

namespace {

using json = nlohmann::json;

// Deeper JSON than this cannot be a valid header (the deepest valid value is depth 3; extra
// fields of an entry, which the format ignores, may nest a little).
constexpr size_t kMaxJsonDepth = 16;

struct DTypeSpec {
  const char* name;
  size_t itemsize;
};
// Every dtype the format names with a whole-byte size; only some of them load.
constexpr DTypeSpec kDTypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
    {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
    {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8},     {"C64", 8},
};

// "[safetensors] <path>: " followed by the message.
template <class... Args>
[[noreturn]] void fail(const std::string& path, const Args&... args) {
  throw Error(str("[safetensors] ", path, ": ", args...));
}

// Checks the bytes before parsing: the JSON lexer treats a NUL as the end of the input (so
// anything after one would go unread) and skips a byte order mark that the reference rejects.
void check_header_bytes(const std::string& path, std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF")
    fail(path, "header starts with a UTF-8 byte order mark; safetensors headers have none");
  if (const void* nul = std::memchr(text.data(), '\0', text.size()))
    fail(path, "header has a NUL byte at offset ", static_cast<const char*>(nul) - text.data(),
         "; a JSON header cannot contain one");
  size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos)
    fail(path, "header is not valid UTF-8: byte ", bad, " is ", printable(text.substr(bad, 1)));
}

// The nlohmann SAX handler: validates each event against the one shape a header may have,
//   {"name": {"dtype": str, "shape": [uint...], "data_offsets": [uint, uint], other: any},
//    "__metadata__": {str: str} or null}
// and fills a SafetensorsHeader. Every problem throws (out of nlohmann's parser).
class HeaderReader {
 public:
  HeaderReader(const std::string& path, uint64_t data_size, SafetensorsHeader& out)
      : path_(path), data_size_(data_size), out_(out) {}

  bool null() {
    if (at(Frame::top) && in_metadata_key_) return true;  // "__metadata__": null is no metadata
    return other_value("null");
  }
  bool boolean(bool) { return other_value("boolean"); }
  bool binary(json::binary_t&) { return other_value("binary"); }
  bool number_unsigned(uint64_t v) {
    if (at(Frame::shape)) return add_dim(v);
    if (at(Frame::offsets)) return add_offset(v);
    return other_value("number");
  }
  bool number_integer(int64_t v) {  // only for text with a minus sign: "-0" lands here too
    if (at(Frame::shape) || at(Frame::offsets))
      bad_number(v == 0 ? std::string("-0") : std::to_string(v));
    return other_value("number");
  }
  bool number_float(double, const std::string& text) {
    if (at(Frame::shape) || at(Frame::offsets)) bad_number(printable(text, 32));
    return other_value("number");
  }
  bool string(std::string& s) {
    if (at(Frame::entry) && field_ == Field::dtype) return set_dtype(s);
    if (at(Frame::metadata)) {
      out_.metadata.emplace(std::move(metadata_key_), std::move(s));
      return true;
    }
    return other_value("string");
  }
  bool start_object(size_t) {
    if (frames_.empty()) return push(Frame::top);
    if (at(Frame::top)) return in_metadata_key_ ? push(Frame::metadata) : start_entry();
    other_value("object");
    return push(Frame::skipped);
  }
  bool start_array(size_t) {
    if (at(Frame::entry) && field_ == Field::shape) return push(Frame::shape);
    if (at(Frame::entry) && field_ == Field::offsets) return push(Frame::offsets);
    other_value("array");
    return push(Frame::skipped);
  }
  bool key(std::string& k) {
    if (at(Frame::top)) return top_key(std::move(k));
    if (at(Frame::entry)) return entry_key(k);
    if (at(Frame::metadata)) {
      if (out_.metadata.count(k))
        fail(path_, "header entry '__metadata__' has field '", printable(k), "' twice");
      metadata_key_ = std::move(k);
      return true;
    }
    if (!frames_.back().keys.insert(k).second)
      fail(path_, where(), "an object in the entry has key '", printable(k), "' twice");
    return true;
  }
  bool end_object() {
    if (at(Frame::entry)) finish_entry();
    return pop();
  }
  bool end_array() {
    if (at(Frame::offsets) && offsets_count_ != 2)
      fail(path_, where(), "data_offsets has ", offsets_count_,
           offsets_count_ == 1 ? " value" : " values", ", not [begin, end]");
    return pop();
  }
  bool parse_error(size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& e) {
    // nlohmann's message repeats the last token in full (it can be megabytes): show a prefix.
    std::string what = e.what();
    size_t at_token = last_token.empty() ? std::string::npos : what.find(last_token);
    if (at_token != std::string::npos)
      what.replace(at_token, last_token.size(), printable(last_token, 32));
    fail(path_, "header is not valid JSON at byte ", position, ": ", printable(what, 400));
  }

 private:
  enum class Frame { top, entry, metadata, shape, offsets, skipped };
  enum class Field { dtype, shape, offsets, other };
  struct Open {
    Frame frame;
    std::set<std::string> keys;  // keys seen so far, for objects with no fixed fields
  };

  bool at(Frame f) const { return !frames_.empty() && frames_.back().frame == f; }
  std::string where() const { return str("tensor '", printable(entry_->first), "': "); }

  bool push(Frame f) {
    if (frames_.size() >= kMaxJsonDepth)
      fail(path_, "header JSON nests deeper than ", kMaxJsonDepth, " levels");
    frames_.push_back(Open{f, {}});
    return true;
  }
  bool pop() {
    frames_.pop_back();
    return true;
  }

  // A value that only an entry's unknown fields (and what nests in them) may hold.
  bool other_value(const char* type) {
    if (frames_.empty()) fail(path_, "header is a JSON ", type, ", not an object");
    switch (frames_.back().frame) {
      case Frame::top:
        if (in_metadata_key_) fail(path_, "__metadata__ is a JSON ", type, ", not an object");
        fail(path_, where(), "entry is a JSON ", type, ", not an object");
      case Frame::metadata:
        fail(path_, "__metadata__ '", printable(metadata_key_), "' is a JSON ", type,
             ", not a string");
      case Frame::shape:
        fail(path_, where(), "shape dim ", entry_->second.shape.size(), " is a JSON ", type,
             ", not a non-negative integer");
      case Frame::offsets:
        fail(path_, where(), "data_offsets value ", offsets_count_, " is a JSON ", type,
             ", not a non-negative integer");
      case Frame::entry:
        if (field_ == Field::dtype)
          fail(path_, where(), "'dtype' is a JSON ", type, ", not a string");
        if (field_ == Field::shape)
          fail(path_, where(), "'shape' is a JSON ", type, ", not an array");
        if (field_ == Field::offsets)
          fail(path_, where(), "'data_offsets' is a JSON ", type, ", not [begin, end]");
        return true;
      case Frame::skipped:
        return true;
    }
    return true;
  }

  [[noreturn]] void bad_number(const std::string& shown) {
    if (at(Frame::shape))
      fail(path_, where(), "shape dim ", entry_->second.shape.size(), " is ", shown,
           ", not a non-negative integer");
    fail(path_, where(), "data_offsets value ", offsets_count_, " is ", shown,
         ", not a non-negative integer");
  }

  bool top_key(std::string k) {
    in_metadata_key_ = k == "__metadata__";
    if (in_metadata_key_) {
      if (metadata_seen_) fail(path_, "header names '__metadata__' twice");
      metadata_seen_ = true;
      return true;
    }
    auto [it, inserted] = out_.tensors.try_emplace(std::move(k));
    if (!inserted) fail(path_, "header names tensor '", printable(it->first), "' twice");
    entry_ = it;
    return true;
  }

  bool start_entry() {
    seen_ = 0;
    offsets_count_ = 0;
    return push(Frame::entry);
  }

  bool entry_key(std::string& k) {
    field_ = k == "dtype"          ? Field::dtype
             : k == "shape"        ? Field::shape
             : k == "data_offsets" ? Field::offsets
                                   : Field::other;
    bool repeated = false;
    if (field_ == Field::other) {
      repeated = !frames_.back().keys.insert(k).second;
    } else {
      unsigned bit = 1u << static_cast<unsigned>(field_);
      repeated = (seen_ & bit) != 0;
      seen_ |= bit;
    }
    if (repeated)
      fail(path_, "header entry '", printable(entry_->first), "' has field '", printable(k),
           "' twice");
    return true;
  }

  bool set_dtype(const std::string& s) {
    if (safetensors_itemsize(s) == 0) fail(path_, where(), "unknown dtype '", printable(s), "'");
    entry_->second.dtype = s;
    return true;
  }

  bool add_dim(uint64_t v) {
    std::vector<int64_t>& shape = entry_->second.shape;
    if (shape.size() == kMaxSafetensorsRank)
      fail(path_, where(), "shape has more than ", kMaxSafetensorsRank,
           " dims, more than Lathe loads");
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(path_, where(), "shape dim ", shape.size(), " is ", v, ", more than 2^63-1");
    shape.push_back(static_cast<int64_t>(v));
    return true;
  }

  bool add_offset(uint64_t v) {
    if (offsets_count_ == 2)
      fail(path_, where(), "data_offsets has more than 2 values, not [begin, end]");
    (offsets_count_ == 0 ? entry_->second.begin : entry_->second.end) = v;
    ++offsets_count_;
    return true;
  }

  void finish_entry();

  const std::string& path_;
  const uint64_t data_size_;  // of the file's data section
  SafetensorsHeader& out_;
  std::vector<Open> frames_;
  bool in_metadata_key_ = false;  // the current top-level key is "__metadata__"
  bool metadata_seen_ = false;
  std::string metadata_key_;
  std::map<std::string, io::TensorInfo>::iterator entry_;  // the entry being read
  Field field_ = Field::other;                             // its current field
  unsigned seen_ = 0;                                      // bit per Field seen in it
  int offsets_count_ = 0;
};

void HeaderReader::finish_entry() {
  const char* names[] = {"dtype", "shape", "data_offsets"};
  for (unsigned f = 0; f < 3; ++f)
    if (!(seen_ & (1u << f))) fail(path_, where(), "entry has no '", names[f], "'");
  io::TensorInfo& info = entry_->second;
  // The product of max(size, 1) must fit, so numel, strides and byte counts never overflow.
  const uint64_t item = safetensors_itemsize(info.dtype);
  int64_t bound = static_cast<int64_t>(item), numel = 1;
  for (int64_t n : info.shape) {
    if (__builtin_mul_overflow(bound, std::max<int64_t>(n, 1), &bound))
      fail(path_, where(), "shape ", str(info.shape), " has more elements than fit in 64 bits");
    numel *= n;
  }
  if (info.begin > info.end)
    fail(path_, where(), "data_offsets [", info.begin, ", ", info.end, "] ends before it begins");
  if (info.end > data_size_)
    fail(path_, where(), "data_offsets [", info.begin, ", ", info.end,
         "] run past the data section (", data_size_, " bytes)");
  const uint64_t need = static_cast<uint64_t>(numel) * item;
  if (info.end - info.begin != need)
    fail(path_, where(), "data_offsets [", info.begin, ", ", info.end, "] hold ",
         info.end - info.begin, " bytes but ", str(info.dtype, info.shape), " needs ", need);
}

// The tensors must tile the data section exactly: no overlaps, no holes (as the format
// requires, so a file cannot hide other content between tensors).
void check_tiling(const std::string& path, const std::map<std::string, io::TensorInfo>& tensors,
                  uint64_t data_size) {
  std::vector<const std::pair<const std::string, io::TensorInfo>*> order;
  order.reserve(tensors.size());
  for (const auto& kv : tensors) order.push_back(&kv);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
    return std::tie(a->second.begin, a->second.end, a->first) <
           std::tie(b->second.begin, b->second.end, b->first);
  });
  uint64_t cursor = 0;
  const std::string* prev = nullptr;
  for (const auto* kv : order) {
    const io::TensorInfo& info = kv->second;
    if (info.begin < cursor)
      fail(path, "tensor '", printable(kv->first), "': data_offsets [", info.begin, ", ", info.end,
           "] overlap tensor '", printable(*prev), "' (which ends at ", cursor, ")");
    if (info.begin > cursor)
      fail(path, "tensor '", printable(kv->first), "': data_offsets [", info.begin, ", ", info.end,
           "] leave bytes [", cursor, ", ", info.begin, ") of the data section unused");
    cursor = info.end;
    prev = &kv->first;
  }
  if (cursor != data_size)
    fail(path, "the data section has ", data_size, " bytes but the tensors cover ", cursor);
}

}  // namespace

size_t safetensors_itemsize(std::string_view dtype) {
  for (const DTypeSpec& d : kDTypes)
    if (dtype == d.name) return d.itemsize;
  return 0;
}

SafetensorsHeader parse_safetensors_header(const std::string& path, std::string_view text,
                                           uint64_t data_size) {
  check_header_bytes(path, text);
  SafetensorsHeader out;
  HeaderReader reader(path, data_size, out);
  json::sax_parse(text.begin(), text.end(), &reader, json::input_format_t::json,
                  /*strict=*/true);
  check_tiling(path, out.tensors, data_size);
  return out;
}

}  // namespace lathe::detail
