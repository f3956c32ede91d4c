#include "lathe/trace/trace_errors.h"

#include <cctype>
#include <sstream>

#include "lathe/core/dispatch_mode.h"
#include "lathe/sym/sym_error.h"
#include "lathe/sym/sym_int.h"

namespace lathe::detail {

namespace {

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool operator_char(char c) { return c == '*' || c == '+' || c == '-' || c == '/' || c == '%'; }

const TracedSize* find_size(const std::vector<TracedSize>& sizes, std::string_view name) {
  for (const TracedSize& s : sizes)
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace

std::vector<TracedSize> traced_sizes(const std::vector<Arg>& args, const std::vector<Arg>& fakes) {
  std::vector<TracedSize> out;
  for (size_t i = 0; i < args.size() && i < fakes.size(); ++i) {
    const Tensor* real = std::get_if<Tensor>(&args[i]);
    const Tensor* fake = std::get_if<Tensor>(&fakes[i]);
    if (!real || !fake || !real->defined() || !fake->defined() || real->dim() != fake->dim())
      continue;
    for (int64_t d = 0; d < fake->dim(); ++d) {
      const SymInt& s = fake->sizes()[d];
      if (!s.is_symbolic()) continue;
      std::string name = str(s);
      if (find_size(out, name)) continue;
      out.push_back({name, real->sizes()[d].expect_int(), str("arg", i, ".size(", d, ")")});
    }
  }
  return out;
}

std::string with_traced_sizes(const std::string& message, const std::vector<TracedSize>& sizes) {
  std::string out;
  std::vector<const TracedSize*> in_expressions;
  size_t i = 0;
  while (i < message.size()) {
    const bool starts_word = i == 0 || !word_char(message[i - 1]);
    size_t j = i + 1;
    while (j < message.size() && std::isdigit(static_cast<unsigned char>(message[j]))) ++j;
    const TracedSize* s = nullptr;
    if (message[i] == 's' && starts_word && j > i + 1 &&
        (j == message.size() || !word_char(message[j])))
      s = find_size(sizes, std::string_view(message).substr(i, j - i));
    if (!s) {
      out += message[i++];
      continue;
    }
    out.append(message, i, j - i);
    const bool already = j < message.size() && message[j] == '=';
    const bool in_expression = (i > 0 && operator_char(message[i - 1])) ||
                               (j < message.size() && operator_char(message[j]));
    if (in_expression) {
      bool listed = false;
      for (const TracedSize* e : in_expressions) listed |= e == s;
      if (!listed) in_expressions.push_back(s);
    } else if (!already) {
      out += '=';
      out += std::to_string(s->value);
    }
    i = j;
  }
  if (!in_expressions.empty()) {
    std::ostringstream os;
    for (size_t k = 0; k < in_expressions.size(); ++k)
      os << (k ? ", " : " (") << in_expressions[k]->name << "=" << in_expressions[k]->value;
    out += os.str() + ")";
  }
  return out;
}

void rethrow_traced_error(const Error& e, const std::vector<TracedSize>& sizes,
                          const CompileOptions& options) {
  std::string message = with_traced_sizes(e.what(), sizes);
  bool mentions_symbol = false;
  for (const TracedSize& s : sizes) mentions_symbol |= message.find(s.name + "=") != message.npos;
  if (mentions_symbol && message.find("mark_static") == std::string::npos) {
    std::ostringstream os;
    os << message << ". While tracing '" << options.name << "' with symbolic sizes (";
    for (size_t k = 0; k < sizes.size(); ++k)
      os << (k ? ", " : "") << sizes[k].name << " = " << sizes[k].source;
    os << "): if this code needs a concrete size, keep the dim static with "
          "lathe::mark_static(tensor, dim) before the call, or compile with "
          "CompileOptions::dynamic = DynamicPolicy::kStatic";
    message = os.str();
  }
  if (dynamic_cast<const sym::ConstraintViolation*>(&e)) throw sym::ConstraintViolation(message);
  if (dynamic_cast<const DataReadWhileTracing*>(&e)) throw DataReadWhileTracing(message);
  if (dynamic_cast<const sym::DataDependentError*>(&e)) throw sym::DataDependentError(message);
  if (dynamic_cast<const sym::SymError*>(&e)) throw sym::SymError(message);
  throw Error(message);
}

}  // namespace lathe::detail
