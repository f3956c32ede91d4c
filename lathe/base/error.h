// lathe::Error and the helpers every layer uses to build clear error messages. The bottom layer
// (header-only): sym and everything above it throw lathe::Error.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace lathe {

// The one exception type Lathe throws for bad input or unsupported use. Messages start with the
// component in brackets: "[conv2d] input has 3 channels, weight expects 4: ...".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {

template <class T>
void append_one(std::ostringstream& os, const T& v) {
  os << v;
}
template <class T>
void append_one(std::ostringstream& os, const std::vector<T>& v) {
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ']';
}

// Concatenates anything printable into a string; vectors print as [a,b,c].
template <class... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (append_one(os, args), ...);
  return os.str();
}

}  // namespace detail
}  // namespace lathe

// Throws lathe::Error with the concatenated message when cond is false.
#define LATHE_CHECK(cond, ...)                                            \
  do {                                                                    \
    if (!(cond)) throw ::lathe::Error(::lathe::detail::str(__VA_ARGS__)); \
  } while (0)
