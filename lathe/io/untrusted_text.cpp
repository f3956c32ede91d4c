#include "lathe/io/untrusted_text.h"

#include <cstdint>
#include <cstdio>

namespace lathe::detail {

namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// The code point of a valid UTF-8 character of n bytes.
uint32_t decode(const unsigned char* p, size_t n) {
  if (n == 1) return p[0];
  uint32_t cp = p[0] & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (p[i] & 0x3F);
  return cp;
}

// Characters that change how a terminal or an editor shows the text around them.
bool is_invisible_control(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || (cp >= 0x200B && cp <= 0x200F) ||
         (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x2069) || cp == 0xFEFF;
}

std::string hex_escape(const char* format, uint32_t value) {
  char buf[16];
  std::snprintf(buf, sizeof buf, format, static_cast<unsigned>(value));
  return buf;
}

}  // namespace

size_t utf8_char_length(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  if (n == 0) return 0;
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  // The allowed range of the second byte depends on the first (this is what excludes overlong
  // forms, UTF-16 surrogates and code points past U+10FFFF).
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (n < len || p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < len; ++i)
    if (!is_continuation(p[i])) return 0;
  return len;
}

size_t find_invalid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    // ASCII runs are the common case: skip them a byte at a time without decoding.
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t len = utf8_char_length(text.substr(i));
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string printable(std::string_view text, size_t max_bytes) {
  std::string out;
  size_t i = 0;
  while (i < text.size() && i < max_bytes) {
    size_t len = utf8_char_length(text.substr(i));
    if (len == 0) {
      out += hex_escape("\\x%02X", static_cast<unsigned char>(text[i]));
      ++i;
      continue;
    }
    uint32_t cp = decode(reinterpret_cast<const unsigned char*>(text.data() + i), len);
    if (cp == '\\')
      out += "\\\\";
    else if (cp < 0x80 && is_invisible_control(cp))
      out += hex_escape("\\x%02X", cp);
    else if (is_invisible_control(cp))
      out += hex_escape("\\u%04X", cp);
    else
      out.append(text.data() + i, len);
    i += len;
  }
  if (i < text.size()) out += "...[" + std::to_string(text.size()) + " bytes]";
  return out;
}

}  // namespace lathe::detail
