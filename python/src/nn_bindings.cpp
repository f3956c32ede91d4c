// lathe.nn (Module and the standard layers), lathe.io (safetensors) and lathe.models (the zoo).
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "lathe/io/safetensors.h"
#include "lathe/models/registry.h"
#include "lathe/nn/layers.h"
#include "lathe/nn/module.h"

namespace lathe::python {

namespace {
using Release = nb::call_guard<nb::gil_scoped_release>;
using nb::arg;
using nn::Module;
using ModulePtr = std::shared_ptr<Module>;

// module(x) / module(x, y): one tensor back for one output, a tuple for several.
nb::object call_module(Module& self, nb::args args) {
  std::vector<Tensor> inputs;
  for (nb::handle a : args) inputs.push_back(nb::cast<Tensor>(a));
  std::vector<Tensor> out;
  {
    nb::gil_scoped_release r;
    out = self.forward_all(inputs);
  }
  if (out.size() == 1) return nb::cast(out[0]);
  return nb::tuple(nb::cast(out));
}

// model.layer1 / model.fc.weight: a child, parameter or buffer of this module by name.
nb::object module_getattr(Module& self, const std::string& name) {
  for (const auto& [n, child] : self.named_children()) {
    if (n == name) return nb::cast(child);
  }
  for (const auto& [n, slot] : self.tensor_slots()) {
    if (n == name) return nb::cast(*slot);
  }
  throw nb::attribute_error(
      detail::str("'", self.type_name(), "' module has no child, parameter or buffer '", name, "'")
          .c_str());
}

template <class M, class... Extra>
nb::class_<M, Module> layer(nb::module_& m, const char* name) {
  return nb::class_<M, Module>(m, name);
}

}  // namespace

void bind_nn(nb::module_& root) {
  nb::module_ m = root.def_submodule("nn", "Lathe's modules (torch.nn names and state_dict keys)");
  nb::class_<Module>(m, "Module")
      .def("__call__", &call_module)
      .def("forward", &call_module)
      .def("state_dict", &Module::state_dict)
      .def("load_state_dict", &Module::load_state_dict, arg("state_dict"), arg("strict") = true,
           Release())
      .def("named_parameters", &Module::named_parameters, arg("remove_duplicate") = true)
      .def("named_buffers", &Module::named_buffers, arg("remove_duplicate") = true)
      .def("parameters", &Module::parameters)
      .def("named_children", [](const Module& self) { return self.named_children(); })
      .def("named_modules", &Module::named_modules)
      .def(
          "train",
          [](Module& self, bool on) {
            self.train(on);
            return self.shared_from_this();
          },
          arg("mode") = true)
      .def("eval",
           [](Module& self) {
             self.eval();
             return self.shared_from_this();
           })
      .def_prop_ro("training", &Module::is_training)
      .def(
          "to",
          [](Module& self, DType dt) {
            self.to(dt);
            return self.shared_from_this();
          },
          Release())
      .def_prop_ro("type_name", &Module::type_name)
      .def("__getattr__", &module_getattr)
      .def("__repr__", [](const Module& self) { return self.type_name() + "()"; });

  layer<nn::Linear>(m, "Linear")
      .def(nb::new_([](int64_t in, int64_t out, bool bias) {
             return nn::make<nn::Linear>(in, out, bias);
           }),
           arg("in_features"), arg("out_features"), arg("bias") = true);
  layer<nn::Conv2d>(m, "Conv2d")
      .def(nb::new_([](int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding,
                       int64_t groups, bool bias) {
             return nn::make<nn::Conv2d>(in, out, k, stride, padding, groups, bias);
           }),
           arg("in_channels"), arg("out_channels"), arg("kernel_size"), arg("stride") = 1,
           arg("padding") = 0, arg("groups") = 1, arg("bias") = true);
  layer<nn::BatchNorm2d>(m, "BatchNorm2d")
      .def(nb::new_([](int64_t f, double eps, double momentum) {
             return nn::make<nn::BatchNorm2d>(f, eps, momentum);
           }),
           arg("num_features"), arg("eps") = 1e-5, arg("momentum") = 0.1);
  layer<nn::LayerNorm>(m, "LayerNorm")
      .def(nb::new_([](std::vector<int64_t> shape, double eps, bool affine) {
             return nn::make<nn::LayerNorm>(shape, eps, affine);
           }),
           arg("normalized_shape"), arg("eps") = 1e-5, arg("elementwise_affine") = true);
  layer<nn::Embedding>(m, "Embedding")
      .def(nb::new_([](int64_t n, int64_t d) { return nn::make<nn::Embedding>(n, d); }),
           arg("num_embeddings"), arg("embedding_dim"));
  layer<nn::Dropout>(m, "Dropout")
      .def(nb::new_([](double p) { return nn::make<nn::Dropout>(p); }), arg("p") = 0.5);
  layer<nn::Hardtanh>(m, "Hardtanh")
      .def(nb::new_([](double lo, double hi) { return nn::make<nn::Hardtanh>(lo, hi); }),
           arg("min_val") = -1.0, arg("max_val") = 1.0);
  layer<nn::GELU>(m, "GELU").def(nb::new_([](std::string a) { return nn::make<nn::GELU>(a); }),
                                 arg("approximate") = "none");
  layer<nn::ReLU>(m, "ReLU").def(nb::new_([] { return nn::make<nn::ReLU>(); }));
  layer<nn::ReLU6>(m, "ReLU6").def(nb::new_([] { return nn::make<nn::ReLU6>(); }));
  layer<nn::Hardswish>(m, "Hardswish").def(nb::new_([] { return nn::make<nn::Hardswish>(); }));
  layer<nn::Hardsigmoid>(m, "Hardsigmoid").def(nb::new_([] {
    return nn::make<nn::Hardsigmoid>();
  }));
  layer<nn::SiLU>(m, "SiLU").def(nb::new_([] { return nn::make<nn::SiLU>(); }));
  layer<nn::Sigmoid>(m, "Sigmoid").def(nb::new_([] { return nn::make<nn::Sigmoid>(); }));
  layer<nn::Tanh>(m, "Tanh").def(nb::new_([] { return nn::make<nn::Tanh>(); }));
  layer<nn::Identity>(m, "Identity").def(nb::new_([] { return nn::make<nn::Identity>(); }));
  layer<nn::MaxPool2d>(m, "MaxPool2d")
      .def(nb::new_([](int64_t k, std::optional<int64_t> s, int64_t p, bool ceil) {
             return nn::make<nn::MaxPool2d>(k, s.value_or(-1), p, ceil);
           }),
           arg("kernel_size"), arg("stride").none() = nb::none(), arg("padding") = 0,
           arg("ceil_mode") = false);
  layer<nn::AvgPool2d>(m, "AvgPool2d")
      .def(nb::new_([](int64_t k, std::optional<int64_t> s, int64_t p, bool ceil, bool inc) {
             return nn::make<nn::AvgPool2d>(k, s.value_or(-1), p, ceil, inc);
           }),
           arg("kernel_size"), arg("stride").none() = nb::none(), arg("padding") = 0,
           arg("ceil_mode") = false, arg("count_include_pad") = true);
  layer<nn::AdaptiveAvgPool2d>(m, "AdaptiveAvgPool2d")
      .def(nb::new_([](std::vector<int64_t> out) { return nn::make<nn::AdaptiveAvgPool2d>(out); }),
           arg("output_size"));
  layer<nn::Flatten>(m, "Flatten")
      .def(nb::new_([](int64_t s, int64_t e) { return nn::make<nn::Flatten>(s, e); }),
           arg("start_dim") = 1, arg("end_dim") = -1);
  layer<nn::Sequential>(m, "Sequential")
      .def(nb::new_([](nb::args mods) {
        std::vector<ModulePtr> v;
        for (nb::handle h : mods) v.push_back(nb::cast<ModulePtr>(h));
        return nn::make<nn::Sequential>(std::move(v));
      }))
      .def("__len__", &nn::Sequential::size)
      .def("__getitem__", [](const nn::Sequential& s, size_t i) {
        if (i >= s.size()) throw nb::index_error("Sequential index out of range");
        return s[i];
      });

  nb::module_ io = root.def_submodule("io", "safetensors files");
  io.def("load_safetensors", &io::load_safetensors, arg("path"), Release());
  io.def("save_safetensors", &io::save_safetensors, arg("path"), arg("tensors"),
         arg("metadata") = std::map<std::string, std::string>{}, Release());
  io.def(
      "load_into", [](Module& mod, const std::string& p, bool s) { io::load_into(mod, p, s); },
      arg("module"), arg("path"), arg("strict") = true, Release());
  io.def(
      "save_from", [](const Module& mod, const std::string& p) { io::save_from(mod, p); },
      arg("module"), arg("path"), Release());

  nb::module_ models = root.def_submodule("models", "the model zoo");
  models.def("model_names", &models::model_names);
  models.def(
      "create_model",
      [](const std::string& name, int64_t num_classes, std::optional<uint64_t> seed) {
        models::ModelOptions o;
        o.num_classes = num_classes;
        o.seed = seed;
        return models::create_model(name, o)->module;
      },
      arg("name"), arg("num_classes") = 1000, arg("seed").none() = nb::none(), Release());
  models.def(
      "default_inputs",
      [](const std::string& name, int64_t batch, uint64_t seed, int64_t image_size,
         int64_t seq_len) {
        models::InputOptions o;
        o.image_size = image_size;
        o.seq_len = seq_len;
        return models::default_inputs(name, batch, seed, o);
      },
      arg("name"), arg("batch") = 1, arg("seed") = 0, arg("image_size") = 0, arg("seq_len") = 128,
      Release());
}

}  // namespace lathe::python
