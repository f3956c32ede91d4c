// The backend registry: name -> factory, guarded by a mutex.
#include <algorithm>
#include <map>
#include <mutex>

#include "lathe/backend/backend.h"
#include "lathe/backend/cpu/cpu_backend.h"
#include "lathe/backend/interpreter.h"

namespace lathe::backend {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, BackendFactory> factories;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();
    reg->factories.emplace("interpreter", [] { return make_interpreter_backend(); });
    reg->factories.emplace("cpu", [] { return make_cpu_backend(); });
    return reg;
  }();
  return *r;
}

std::string known_names(const Registry& r) {
  std::string s;
  for (const auto& [name, f] : r.factories) s += (s.empty() ? "" : ", ") + name;
  return s;
}

}  // namespace

void register_backend(const std::string& name, BackendFactory factory) {
  LATHE_CHECK(!name.empty() && factory, "[backend] register_backend needs a name and a factory");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  LATHE_CHECK(!r.factories.count(name), "[backend] a backend named '", name,
              "' is already registered");
  r.factories.emplace(name, std::move(factory));
}

std::unique_ptr<Backend> create_backend(const std::string& name) {
  Registry& r = registry();
  BackendFactory factory;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find(name);
    LATHE_CHECK(it != r.factories.end(), "[backend] unknown backend '", name,
                "'; known backends: ", known_names(r));
    factory = it->second;
  }
  std::unique_ptr<Backend> b = factory();
  LATHE_CHECK(b != nullptr, "[backend] the factory of backend '", name, "' returned nothing");
  return b;
}

std::vector<std::string> backend_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, f] : r.factories) names.push_back(name);
  return names;
}

}  // namespace lathe::backend
