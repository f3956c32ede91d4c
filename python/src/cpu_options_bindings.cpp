// lathe.cpu_options() / lathe.set_cpu_options(): the cpu backend's options
// (lathe/backend/cpu/cpu_options.h) as a dict, settable from Python.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "lathe/backend/cpu/cpu_options.h"
#include "lathe/base/error.h"

namespace lathe::python {
namespace {

using backend::cpu::CpuBackendOptions;
using backend::cpu::ProfileMode;

const char* profile_name(ProfileMode p) {
  return p == ProfileMode::steps ? "steps" : p == ProfileMode::summary ? "1" : "0";
}

nb::dict to_dict(const CpuBackendOptions& o) {
  nb::dict d;
  d["log_passes"] = o.log_passes;
  d["log_graphs"] = o.log_graphs;
  d["disabled_passes"] = o.disabled_passes;
  d["block"] = o.block;
  d["interpreter"] = o.interpreter;
  d["layout_tuning"] = o.layout_tuning;
  d["winograd"] = o.winograd;
  d["layout_regions"] = o.layout_regions;
  d["dw_fusion"] = o.dw_fusion;
  d["profile"] = profile_name(o.profile);
  d["log_threads"] = o.log_threads;
  d["adaptive_threads"] = o.adaptive_threads;
  return d;
}

// `o` with the keys of `d` replaced; an unknown key is an error.
CpuBackendOptions updated(CpuBackendOptions o, const nb::dict& d) {
  for (auto [key, value] : d) {
    const std::string k = nb::cast<std::string>(key);
    if (k == "log_passes")
      o.log_passes = nb::cast<bool>(value);
    else if (k == "log_graphs")
      o.log_graphs = nb::cast<bool>(value);
    else if (k == "disabled_passes")
      o.disabled_passes = nb::cast<std::vector<std::string>>(value);
    else if (k == "block")
      o.block = nb::cast<std::optional<int>>(value);
    else if (k == "interpreter")
      o.interpreter = nb::cast<bool>(value);
    else if (k == "layout_tuning")
      o.layout_tuning = nb::cast<bool>(value);
    else if (k == "winograd")
      o.winograd = nb::cast<std::optional<bool>>(value);
    else if (k == "layout_regions")
      o.layout_regions = nb::cast<bool>(value);
    else if (k == "dw_fusion")
      o.dw_fusion = nb::cast<bool>(value);
    else if (k == "log_threads")
      o.log_threads = nb::cast<bool>(value);
    else if (k == "adaptive_threads")
      o.adaptive_threads = nb::cast<bool>(value);
    else if (k == "profile") {
      const std::string p = nb::cast<std::string>(nb::str(value));
      o.profile = p == "steps"                              ? ProfileMode::steps
                  : (p.empty() || p == "0" || p == "False") ? ProfileMode::off
                                                            : ProfileMode::summary;
    } else {
      throw Error(lathe::detail::str("[cpu] unknown cpu option '", k, "'"));
    }
  }
  LATHE_CHECK(!o.block || *o.block == 0 || *o.block == 8 || *o.block == 16,
              "[cpu] block must be None, 0, 8 or 16, got ", *o.block);
  return o;
}

}  // namespace

void bind_cpu_options(nb::module_& m) {
  m.def(
      "cpu_options", [] { return to_dict(backend::cpu::options()); },
      "The cpu backend's options in effect (set from code, else from the environment).");
  m.def(
      "set_cpu_options",
      [](std::optional<nb::dict> d) {
        if (!d) return backend::cpu::set_options(std::nullopt);
        backend::cpu::set_options(updated(backend::cpu::options(), *d));
      },
      nb::arg("options").none(),
      "Sets the cpu backend's options: a dict of the keys to change (the rest stay as they are), "
      "or None to return to the environment's (LATHE_* variables).");
}

}  // namespace lathe::python
