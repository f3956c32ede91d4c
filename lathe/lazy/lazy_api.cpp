// The lazy device's public functions (metrics, backend choice, cache control, test hooks),
// sync(), the transfers between the CPU and the device, and the registration with core.
#include <mutex>

#include "lathe/core/device_registry.h"
#include "lathe/lazy/lazy.h"
#include "lathe/lazy/lazy_context.h"

namespace lathe::lazy {
namespace {

void sync_hook() { lathe::sync(); }

}  // namespace

Metrics metrics() {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.metrics;
}

void reset_metrics() {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  c.metrics = Metrics{};
}

void set_backend(const std::string& name) {
  auto b = backend::create_backend(name);  // throws for an unknown name
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  c.backend_name = name;
  c.backend = std::move(b);
  c.cache.clear();
}

std::string backend() {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.backend_name;
}

void clear_cache() {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  c.cache.clear();
}

size_t cache_size() {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.cache.size();
}

namespace testing {
void set_hash_override(std::function<uint64_t(uint64_t)> hash) {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  c.hash_override = std::move(hash);
}

void set_record_observer(std::function<void(const OpDef&, const std::vector<Tensor>&)> observer) {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  c.record_observer = std::move(observer);
}

std::string last_graph() {
  LazyContext& c = context();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.last_graph;
}
}  // namespace testing

}  // namespace lathe::lazy

namespace lathe {

void sync() {
  lazy::LazyContext& c = lazy::context();
  std::lock_guard<std::mutex> lock(c.mu);
  lazy::sync_locked(c);
}

namespace {

// Tensor::to(Device) onto or off the lazy device (registered with core below).
Tensor lazy_transfer(const Tensor& t, Device d) {
  lazy::LazyContext& c = lazy::context();
  if (d.kind() == DeviceKind::lazy) {
    Tensor moved = detail::wrap_device_buffer(lazy::copy_of(t), Device::lazy());
    moved.set_requires_grad(t.requires_grad());
    std::lock_guard<std::mutex> lock(c.mu);
    c.metrics.transfers_to_device++;
    c.metrics.bytes_to_device += static_cast<int64_t>(t.nbytes());
    return moved;
  }
  std::lock_guard<std::mutex> lock(c.mu);
  lazy::sync_locked(c);
  LATHE_CHECK(t.has_storage(), "[to] lazy tensor ", t.shape_string(),
              " has no data: the graph computing it failed");
  Tensor out = lazy::copy_of(detail::device_buffer(t));
  c.metrics.transfers_from_device++;
  c.metrics.bytes_from_device += static_cast<int64_t>(t.nbytes());
  return out;
}

// Autograd's version counter of a lazy tensor: its storage's (writes that ran), or, while it
// stands for a value, that value's buffer's version when recorded plus the writes recorded into
// it since (writes not run yet), whichever is larger.
uint64_t lazy_version(const Tensor& t) {
  auto& c = lazy::context();
  std::lock_guard<std::mutex> lock(c.mu);
  const TensorImpl& impl = t.impl();
  uint64_t v = impl.storage ? impl.storage->version() : 0;
  if (const lazy::LazyValue* lv = lazy::tensor_value_ptr(impl)) {
    const lazy::LazyValue* root = lv->root();
    v = std::max(v, root->base_version + root->writes);
  }
  return v;
}

const detail::DeviceFunctions lazy_device_functions{.transfer = &lazy_transfer,
                                                    .sync = &lazy::sync_hook,
                                                    .dispatch = &lazy::record,
                                                    .version = &lazy_version};

}  // namespace

// lazy.h calls this from every translation unit that includes it, so the linker keeps this object
// (and the device) in any link of the libraries, without linker flags.
bool lazy::link_lazy_device() {
  static const bool registered =
      (detail::register_device(DeviceKind::lazy, &lazy_device_functions), true);
  return registered;
}

}  // namespace lathe

