#include "lathe/trace/cache_entry.h"

#include "lathe/core/device_registry.h"
#include "lathe/core/grad_mode.h"

namespace lathe::detail {

namespace {

const Tensor& tensor_at(const std::vector<Arg>& args, int i) { return std::get<Tensor>(args[i]); }

// A new tensor with t's values, sizes and strides (t is dense: a factory made it).
Tensor fresh_copy(const Tensor& t) {
  Tensor c = empty_like(t);
  c.copy_(t);
  return c;
}

}  // namespace

// Lazy tensors run as CPU views of their device buffers (the kernels read and write the device
// memory in place: nothing is copied); lazy results come back as device data.
std::vector<Tensor> CacheEntry::run(const std::vector<Arg>& args) const {
  std::vector<Tensor> inputs;
  inputs.reserve(input_origin.size());
  for (int o : input_origin) {
    if (o >= 0) {
      const Tensor& t = tensor_at(args, o);
      inputs.push_back(on_lazy(t) ? device_buffer(t) : t);
      continue;
    }
    const Tensor& c = capture(-1 - o);
    const Tensor& b = captured_buffers[-1 - o];
    if (fresh_capture[-1 - o]) {
      inputs.push_back(fresh_copy(c));
    } else if (!on_lazy(c)) {
      inputs.push_back(c);
    } else if (c.impl().storage == b.impl().storage && c.storage_offset() == b.storage_offset()) {
      inputs.push_back(b);
    } else {
      // The capture was written lazily since the trace (pending) or holds a new buffer.
      if (!c.has_storage()) sync_devices();
      inputs.push_back(device_buffer(c));
    }
  }
  int64_t inline_syms[16];
  std::vector<int64_t> heap_syms;
  int64_t* syms = inline_syms;
  if (num_symbols > 16) {
    heap_syms.resize(num_symbols);
    syms = heap_syms.data();
  }
  for (const SymbolBinding& b : bindings)
    syms[b.symbol] = *tensor_at(args, b.arg).sizes()[b.dim].maybe_int();
  std::vector<Tensor> outs;
  if (aot) {
    aot_check_inputs(*aot, inputs);
    NoGradGuard no_grad;  // the one node aot_attach records stands for the whole graph
    outs = executable->run(inputs, backend::SymbolValues(syms, num_symbols));
  } else {
    outs = executable->run(inputs, backend::SymbolValues(syms, num_symbols));
  }
  if (aot) aot_attach(aot, inputs, outs, backend::SymbolValues(syms, num_symbols));
  for (size_t i = 0; i < outs.size() && i < output_device.size(); ++i)
    if (!output_device[i].is_cpu()) outs[i] = wrap_device_buffer(outs[i], output_device[i]);
  std::vector<Tensor> result;
  result.reserve(outputs.size());
  for (const OutputSpec& o : outputs) {
    switch (o.kind) {
      case OutputSpec::Kind::kGraph:
        result.push_back(outs.at(o.index));
        break;
      case OutputSpec::Kind::kArgument:
        result.push_back(tensor_at(args, o.index));
        break;
      case OutputSpec::Kind::kCaptured:
        result.push_back(fresh_capture[o.index] ? inputs[capture_input[o.index]]
                                                : capture(o.index));
        break;
      case OutputSpec::Kind::kUndefined:
        result.emplace_back();
        break;
    }
  }
  return result;
}

}  // namespace lathe::detail
