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
  std::vector<std::string> missing, unexpected;
  for (const auto& kv : own)
    if (!file.count(kv.first)) missing.push_back(kv.first);
  for (const auto& kv : file)
    if (!own.count(kv.first)) unexpected.push_back(kv.first);
  if (strict && (!missing.empty() || !unexpected.empty())) {
    std::string msg;
    if (!missing.empty())
      msg += detail::str(missing.size(),
                         " module tensor(s) missing from the file: ", list_keys(missing));
    if (!unexpected.empty())
      msg += detail::str(msg.empty() ? "" : "; ", unexpected.size(),
                         " file tensor(s) the module does not have: ", list_keys(unexpected));
    throw Error(detail::str("[safetensors] ", path, ": ", msg));
  }
  std::map<std::string, Tensor> common;
  for (const auto& [key, t] : file) {
    auto it = own.find(key);
    if (it == own.end()) continue;
    if (t.shape() != it->second.shape())
      throw Error(detail::str("[safetensors] ", path, ": tensor '", key, "': the file has ",
                              t.shape_string(), " but the module has ", it->second.shape_string()));
    common.emplace(key, t);
  }
  m.load_state_dict(common, /*strict=*/false);
}

void save_from(const nn::Module& m, const std::string& path) {
  save_safetensors(path, m.state_dict());
}

}  // namespace lathe::io
