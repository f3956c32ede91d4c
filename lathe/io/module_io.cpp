// Module <-> safetensors (kept apart from safetensors.cpp so a program that only reads tensor
// files does not pull in nn::Module).
#include <algorithm>

#include "lathe/io/safetensors.h"
#include "lathe/nn/module.h"

namespace lathe::io {

namespace {

// "'a', 'b', 'c' and 4 more"
std::string list_keys(const std::vector<std::string>& keys) {
  std::string out;
  const size_t shown = std::min<size_t>(keys.size(), 8);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", '" : "'") + keys[i] + "'";
  if (keys.size() > shown) out += detail::str(" and ", keys.size() - shown, " more");
  return out;
}

}  // namespace

void load_into(nn::Module& m, const std::string& path, bool strict) {
  std::map<std::string, Tensor> file = load_safetensors(path);
  std::map<std::string, Tensor> own = m.state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& kv : own)
    if (!file.count(kv.first)) missing.push_back(kv.first);
  std::map<std::string, Tensor> common;
  for (const auto& [key, t] : file) {
    auto it = own.find(key);
    if (it == own.end()) {
      unexpected.push_back(key);
    } else if (!nn::state_dict_shapes_match(it->second, t)) {
      mismatched.push_back(detail::str("tensor '", key, "': the file has ", t.shape_string(),
                                       " but the module has ", it->second.shape_string()));
    } else {
      common.emplace(key, t);
    }
  }
  // Every problem in one error, as PyTorch's load_state_dict reports them.
  std::vector<std::string> problems;
  if (strict && !missing.empty())
    problems.push_back(detail::str(
        missing.size(), " module tensor(s) missing from the file: ", list_keys(missing)));
  if (strict && !unexpected.empty())
    problems.push_back(detail::str(
        unexpected.size(), " file tensor(s) the module does not have: ", list_keys(unexpected)));
  for (const std::string& p : mismatched) problems.push_back(p);
  if (!problems.empty()) {
    std::string msg;
    for (const std::string& p : problems) msg += (msg.empty() ? "" : "; ") + p;
    throw Error(detail::str("[safetensors] ", path, ": ", msg));
  }
  m.load_state_dict(common, /*strict=*/false);
}

void save_from(const nn::Module& m, const std::string& path) {
  save_safetensors(path, m.state_dict());
}

}  // namespace lathe::io
