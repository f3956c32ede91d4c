// Text from an untrusted file (tensor names, dtype strings, JSON tokens) made safe to put in an
// error message: cut to a short prefix, with control characters and invalid UTF-8 escaped, so a
// hostile file can neither flood a log nor send escape sequences to a terminal.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lathe::detail {

// Length of the valid UTF-8 character (RFC 3629: no overlongs, surrogates or code points past
// U+10FFFF) that starts text[0]; 0 when the bytes there are not one.
size_t utf8_char_length(std::string_view text);

// Offset of the first byte that is not part of valid UTF-8, or std::string_view::npos.
size_t find_invalid_utf8(std::string_view text);

// At most about max_bytes of text, with C0/C1 control characters, DEL, Unicode format and
// bidirectional controls shown as \xNN / \uNNNN, invalid UTF-8 bytes as \xNN and '\' as "\\".
// A cut text ends with "...[N bytes]" (N the full length).
std::string printable(std::string_view text, size_t max_bytes = 64);

}  // namespace lathe::detail
