// Every way a file can be malformed gives a lathe::Error naming the file and the tensor.
#include <gtest/gtest.h>

#include "lathe/io/safetensors.h"
#include "tests/io/io_test_util.h"

namespace lathe::io {
namespace {

using testing::length_prefix;
using testing::make_file;
using testing::write_bytes;

class SafetensorsErrors : public testing::ScratchDirTest {
 protected:
  // Writes the bytes as model.safetensors and checks loading fails with every piece (and the
  // component and file name) in the message.
  void expect_load_error(const std::string& bytes, std::vector<std::string> pieces) {
    std::string p = path("model.safetensors");
    write_bytes(p, bytes);
    pieces.push_back("[safetensors] " + p + ": ");
    testing::expect_error([&] { load_safetensors(p); }, pieces);
  }
  // A file of one header (text) over `data_bytes` bytes of data.
  void expect_header_error(const std::string& header, size_t data_bytes,
                           std::vector<std::string> pieces) {
    expect_load_error(make_file(header, std::string(data_bytes, '\x01')), std::move(pieces));
  }
};

std::string entry(const std::string& dtype, const std::string& shape, const std::string& offsets) {
  return R"({"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}";
}

TEST_F(SafetensorsErrors, FileTooShortOrMissing) {
  expect_load_error("", {"file is 0 bytes, too short for the 8-byte header length"});
  expect_load_error("abc", {"file is 3 bytes, too short"});
  testing::expect_error([&] { load_safetensors(path("absent.safetensors")); },
                        {"[safetensors]", "absent.safetensors", "cannot open"});
  testing::expect_error([&] { load_safetensors(dir_.string()); }, {"not a regular file"});
}

TEST_F(SafetensorsErrors, HeaderLength) {
  expect_load_error(length_prefix(1000) + "{}",
                    {"header length 1000 runs past the end of the file (10 bytes)"});
  expect_load_error(length_prefix(200'000'000) + "{}",
                    {"header length 200000000 is over the format's limit of 100000000 bytes"});
  expect_load_error(length_prefix(~uint64_t{0}) + "{}", {"is over the format's limit"});
}

TEST_F(SafetensorsErrors, HeaderJson) {
  expect_header_error(R"({"a":)", 0, {"header is not valid JSON"});
  expect_header_error("", 0, {"header is not valid JSON"});
  expect_header_error("{\"a\xff\":1}", 0, {"header is not valid UTF-8: byte 3 is \\xFF"});
  expect_header_error("[1,2]", 0, {"header is a JSON array, not an object"});
  expect_header_error("\"text\"", 0, {"header is a JSON string, not an object"});
  expect_header_error(std::string(100, '[') + std::string(100, ']'), 0,
                      {"header is a JSON array, not an object"});
  expect_header_error(R"({"a":{"x":)" + std::string(50, '[') + std::string(50, ']') + "}}", 0,
                      {"nests deeper than"});
}

TEST_F(SafetensorsErrors, DuplicateKeys) {
  std::string e = entry("F32", "[1]", "[0,4]");
  expect_header_error(R"({"a":)" + e + R"(,"a":)" + e + "}", 4, {"header names tensor 'a' twice"});
  expect_header_error(R"({"a":{"dtype":"F32","dtype":"I32","shape":[1],"data_offsets":[0,4]}})", 4,
                      {"header entry 'a' has field 'dtype' twice"});
  expect_header_error(R"({"__metadata__":{"k":"1","k":"2"}})", 0,
                      {"header entry '__metadata__' has field 'k' twice"});
}

TEST_F(SafetensorsErrors, EntryFields) {
  expect_header_error(R"({"w":5})", 0, {"tensor 'w': entry is a JSON number, not an object"});
  expect_header_error(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4,
                      {"tensor 'w': entry has no 'dtype'"});
  expect_header_error(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4,
                      {"tensor 'w': entry has no 'shape'"});
  expect_header_error(R"({"w":{"dtype":"F32","shape":[1]}})", 4,
                      {"tensor 'w': entry has no 'data_offsets'"});
  expect_header_error(R"({"w":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})", 4,
                      {"tensor 'w': 'dtype' is a JSON number, not a string"});
  expect_header_error(R"({"w":)" + entry("F32", "\"1\"", "[0,4]") + "}", 4,
                      {"tensor 'w': 'shape' is a JSON string, not an array"});
  expect_header_error(R"({"w":)" + entry("F33", "[1]", "[0,4]") + "}", 4,
                      {"tensor 'w': unknown dtype 'F33'"});
}

TEST_F(SafetensorsErrors, Shapes) {
  expect_header_error(R"({"w":)" + entry("F32", "[2,-1]", "[0,4]") + "}", 4,
                      {"tensor 'w': shape dim 1 is -1, not a non-negative integer"});
  expect_header_error(R"({"w":)" + entry("F32", "[2.5]", "[0,4]") + "}", 4,
                      {"tensor 'w': shape dim 0 is 2.5, not a non-negative integer"});
  expect_header_error(R"({"w":)" + entry("F32", "[\"3\"]", "[0,4]") + "}", 4,
                      {"shape dim 0 is a JSON string, not a non-negative integer"});
  expect_header_error(R"({"w":)" + entry("F32", "[18446744073709551615]", "[0,4]") + "}", 4,
                      {"shape dim 0 is 18446744073709551615, more than 2^63-1"});
  expect_header_error(R"({"w":)" + entry("F32", "[4294967296,4294967296]", "[0,4]") + "}", 4,
                      {"tensor 'w': shape [4294967296,4294967296] has more elements than fit"});
  // Even with a zero dim, the other dims must not overflow (strides would).
  expect_header_error(R"({"w":)" + entry("I64", "[0,4611686018427387904,4]", "[0,0]") + "}", 0,
                      {"has more elements than fit in 64 bits"});
}

TEST_F(SafetensorsErrors, DataOffsets) {
  expect_header_error(R"({"w":)" + entry("F32", "[1]", "[0]") + "}", 4,
                      {"tensor 'w': data_offsets has 1 value, not [begin, end]"});
  expect_header_error(R"({"w":)" + entry("F32", "[1]", "[0,4,8]") + "}", 4,
                      {"data_offsets has more than 2 values, not [begin, end]"});
  expect_header_error(R"({"w":)" + entry("F32", "[1]", "{\"a\":1}") + "}", 4,
                      {"'data_offsets' is a JSON object, not [begin, end]"});
  expect_header_error(R"({"w":)" + entry("F32", "[1]", "[-4,0]") + "}", 4,
                      {"data_offsets value 0 is -4, not a non-negative integer"});
  expect_header_error(R"({"w":)" + entry("F32", "[1]", "[0,4.0]") + "}", 4,
                      {"data_offsets value 1 is 4.0, not a non-negative integer"});
  expect_header_error(R"({"w":)" + entry("F32", "[1]", "[8,4]") + "}", 8,
                      {"tensor 'w': data_offsets [8, 4] ends before it begins"});
  expect_header_error(R"({"w":)" + entry("F32", "[1]", "[4,8]") + "}", 6,
                      {"tensor 'w': data_offsets [4, 8] run past the data section (6 bytes)"});
  expect_header_error(R"({"w":)" + entry("F32", "[1]", "[0,18446744073709551615]") + "}", 6,
                      {"data_offsets [0, 18446744073709551615] run past the data section"});
  // The example from the design: the byte count must match the shape.
  expect_header_error(R"({"fc.weight":)" + entry("F32", "[10,5]", "[0,100]") + "}", 100,
                      {"tensor 'fc.weight': data_offsets [0, 100] hold 100 bytes but F32[10,5] "
                       "needs 200"});
}

TEST_F(SafetensorsErrors, TensorsMustTileTheDataSection) {
  expect_header_error(
      R"({"a":)" + entry("F32", "[2]", "[0,8]") + R"(,"b":)" + entry("F32", "[2]", "[4,12]") + "}",
      12, {"tensor 'b': data_offsets [4, 12] overlap tensor 'a' (which ends at 8)"});
  expect_header_error(
      R"({"a":)" + entry("F32", "[1]", "[0,4]") + R"(,"b":)" + entry("F32", "[1]", "[8,12]") + "}",
      12, {"tensor 'b': data_offsets [8, 12] leave bytes [4, 8)", "unused"});
  expect_header_error(R"({"a":)" + entry("F32", "[1]", "[0,4]") + "}", 9,
                      {"the data section has 9 bytes but the tensors cover 4"});
  // Two names for the same bytes.
  expect_header_error(
      R"({"a":)" + entry("F32", "[1]", "[0,4]") + R"(,"b":)" + entry("I32", "[1]", "[0,4]") + "}",
      4, {"tensor 'b': data_offsets [0, 4] overlap tensor 'a'"});
}

TEST_F(SafetensorsErrors, Metadata) {
  expect_header_error(R"({"__metadata__":[1]})", 0,
                      {"__metadata__ is a JSON array, not an object"});
  expect_header_error(R"({"__metadata__":{"epoch":3}})", 0,
                      {"__metadata__ 'epoch' is a JSON number, not a string"});
}

TEST_F(SafetensorsErrors, UnsupportedDtypeAndBadBool) {
  write_bytes(path("u8.safetensors"),
              make_file(R"({"img":)" + entry("U8", "[4]", "[0,4]") + "}", "abcd"));
  // The header is valid: the file opens, only reading the tensor fails.
  SafetensorsFile f(path("u8.safetensors"));
  EXPECT_EQ(f.keys(), std::vector<std::string>{"img"});
  testing::expect_error([&] { f.get("img"); },
                        {"[safetensors]", "u8.safetensors", "tensor 'img': unsupported dtype U8"});
  testing::expect_error([&] { load_safetensors(path("u8.safetensors")); },
                        {"tensor 'img': unsupported dtype U8"});

  std::string bools("\x00\x01\x02", 3);
  expect_load_error(make_file(R"({"mask":)" + entry("BOOL", "[3]", "[0,3]") + "}", bools),
                    {"tensor 'mask': BOOL element 2 is byte 2, not 0 or 1"});
}

}  // namespace
}  // namespace lathe::io
