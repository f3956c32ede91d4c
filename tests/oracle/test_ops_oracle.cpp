// The op oracle: every case that tests/oracle/gen_ops.py computed with PyTorch is replayed
// through the ops.h functions and Tensor methods and compared with torch's outputs (values,
// dtype, shape; for views also strides, offset and aliasing). One test per case:
//   test_oracle --gtest_filter='Torch/OpOracle.conv2d_*'
// The data lives in LATHE_BINARY_DIR/oracle_data/ops.safetensors; it is (re)generated with the
// project's venv when missing or older than gen_ops.py. See docs/oracle.md.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/lazy/lazy.h"
#include "lathe/ops/op_def.h"
#include "lathe/trace/compile.h"
#include "tests/oracle/oracle_python.h"
#include "tests/oracle/oracle_reader.h"
#include "tests/oracle/oracle_weak_ops.h"

namespace lathe::oracle {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Tensors = std::vector<Tensor>;
using T = const Tensor&;
using Ints = std::vector<int64_t>;

// ---------------------------------------------------------------------------------------------
// Data: generated on demand, loaded once.
// ---------------------------------------------------------------------------------------------

struct OracleData {
  bool available = false;
  bool skip = false;   // no python to generate the data with: skip (fail under CI)
  std::string reason;  // why the data is unavailable
  SafetensorsFile file;
  std::map<std::string, json> cases;
  std::vector<std::string> order;
};

OracleData load_oracle_data() {
  OracleData d;
  const fs::path dir = fs::path(LATHE_BINARY_DIR) / "oracle_data";
  const fs::path data = dir / "ops.safetensors";
  const fs::path gen = fs::path(LATHE_SOURCE_DIR) / "tests/oracle/gen_ops.py";
  std::error_code ec;
  const bool stale = !fs::exists(data) || (fs::exists(gen) && fs::last_write_time(gen, ec) >
                                                                  fs::last_write_time(data, ec));
  if (stale) {
    const std::string py = python_path();
    if (!fs::exists(py)) {
      if (!fs::exists(data)) {
        d.skip = true;
        d.reason = "no oracle data at " + data.string() + " and no python at " + py +
                   " to generate it (set LATHE_PYTHON, or create the project venv)";
        return d;
      }
    } else {
      fs::create_directories(dir, ec);
      const fs::path log = dir / "gen_ops.log";
      const std::string cmd = "\"" + py + "\" \"" + gen.string() + "\" --out \"" + dir.string() +
                              "\" > \"" + log.string() + "\" 2>&1";
      if (std::system(cmd.c_str()) != 0) {
        d.reason = "the generator failed: " + cmd + " (see " + log.string() + ")";
        return d;
      }
    }
  }
  try {
    d.file = read_safetensors(data.string());
    json cases = json::parse(d.file.metadata.at("cases"));
    for (auto& c : cases) {
      std::string name = c.at("name").get<std::string>();
      d.order.push_back(name);
      d.cases[name] = std::move(c);
    }
  } catch (const std::exception& e) {
    d.reason = std::string("cannot read ") + data.string() + ": " + e.what();
    return d;
  }
  d.available = true;
  return d;
}

const OracleData& oracle_data() {
  static const OracleData d = load_oracle_data();
  return d;
}

std::vector<std::string> case_names() {
  const OracleData& d = oracle_data();
  if (!d.available) return {"data_unavailable"};
  return d.order;
}

// ---------------------------------------------------------------------------------------------
// Inputs: the stored contiguous base, with the case's view chain re-created.
// ---------------------------------------------------------------------------------------------

Tensor apply_views(Tensor x, const json& views) {
  for (const json& v : views) {
    const std::string kind = v.at("view").get<std::string>();
    if (kind == "transpose") {
      x = x.transpose(v.at("dims")[0].get<int64_t>(), v.at("dims")[1].get<int64_t>());
    } else if (kind == "permute") {
      x = x.permute(v.at("dims").get<Ints>());
    } else if (kind == "slice") {
      int64_t end = v.contains("end") && !v.at("end").is_null()
                        ? v.at("end").get<int64_t>()
                        : std::numeric_limits<int64_t>::max();
      x = x.slice(v.at("dim").get<int64_t>(), v.value("start", int64_t{0}), end,
                  v.value("step", int64_t{1}));
    } else if (kind == "expand") {
      x = x.expand(to_shape(v.at("size").get<Ints>()));
    } else if (kind == "select") {
      x = x.select(v.at("dim").get<int64_t>(), v.at("index").get<int64_t>());
    } else if (kind == "channels_last") {
      x = x.to_channels_last();
    } else {
      throw Error("[oracle] unknown view step '" + kind + "'");
    }
  }
  return x;
}

DType parse_dtype(const std::string& s) {
  if (s == "f32") return DType::f32;
  if (s == "f64") return DType::f64;
  if (s == "i64") return DType::i64;
  if (s == "i32") return DType::i32;
  if (s == "b8") return DType::b8;
  throw Error("[oracle] unknown dtype '" + s + "'");
}

std::optional<double> opt_double(const json& a, const char* key) {
  if (!a.contains(key) || a.at(key).is_null()) return std::nullopt;
  return a.at(key).get<double>();
}

// ---------------------------------------------------------------------------------------------
// The op table: case op name -> a call of the ops.h function (or Tensor method).
// ---------------------------------------------------------------------------------------------

struct OpEntry {
  bool linked = true;  // false when the ops.h function is not defined yet
  // xs: the inputs (undefined Tensor for a null input); bases: their stored bases.
  std::function<Tensors(Tensors& xs, Tensors& bases, const json& a)> run;
};

using Un = Tensor (*)(T);
using Bin = Tensor (*)(T, T);
using BinA = Tensor (*)(T, T, double);
using Sc = Tensor (*)(T, double);
using Red = Tensor (*)(T, Ints, bool);
using RedDim = Tensor (*)(T, int64_t, bool);
using VarFn = Tensor (*)(T, Ints, int64_t, bool);
using LossFn = Tensor (*)(T, T, const std::string&, int64_t);
using SoftmaxFn = Tensor (*)(T, int64_t);

template <class F>
OpEntry unary(F f) {
  return {linked(f), [f](Tensors& x, Tensors&, const json&) -> Tensors { return {f(x[0])}; }};
}
template <class F>
OpEntry binary(F f) {
  return {linked(f), [f](Tensors& x, Tensors&, const json&) -> Tensors { return {f(x[0], x[1])}; }};
}
template <class F>
OpEntry scalar(F f) {
  return {linked(f), [f](Tensors& x, Tensors&, const json& a) -> Tensors {
            return {f(x[0], a.at("other").get<double>())};
          }};
}
OpEntry binary_alpha(BinA f) {
  return {linked(f), [f](Tensors& x, Tensors&, const json& a) -> Tensors {
            return {f(x[0], x[1], a.value("alpha", 1.0))};
          }};
}
OpEntry reduction(Red f) {
  return {linked(f), [f](Tensors& x, Tensors&, const json& a) -> Tensors {
            return {f(x[0], a.at("dims").get<Ints>(), a.at("keepdim").get<bool>())};
          }};
}
OpEntry reduction_dim(RedDim f) {
  return {linked(f), [f](Tensors& x, Tensors&, const json& a) -> Tensors {
            return {f(x[0], a.at("dim").get<int64_t>(), a.at("keepdim").get<bool>())};
          }};
}
OpEntry variance(VarFn f) {
  return {linked(f), [f](Tensors& x, Tensors&, const json& a) -> Tensors {
            return {f(x[0], a.at("dims").get<Ints>(), a.at("correction").get<int64_t>(),
                      a.at("keepdim").get<bool>())};
          }};
}
OpEntry loss(LossFn f) {
  return {linked(f), [f](Tensors& x, Tensors&, const json& a) -> Tensors {
            return {f(x[0], x[1], a.value("reduction", std::string("mean")),
                      a.value("ignore_index", int64_t{-100}))};
          }};
}
OpEntry softmax_like(SoftmaxFn f) {
  return {linked(f), [f](Tensors& x, Tensors&, const json& a) -> Tensors {
            return {f(x[0], a.at("dim").get<int64_t>())};
          }};
}
// Tensor methods and factories are always linked.
OpEntry method(std::function<Tensors(Tensors&, const json&)> f) {
  return {true, [f](Tensors& x, Tensors&, const json& a) { return f(x, a); }};
}

// A registered op with no ops.h function (the functional forms ir::functionalize emits), called
// through dispatch; its attributes are read from the case by the op's schema.
OpEntry registered(const char* name) {
  return method([name](Tensors& x, const json& a) -> Tensors {
    const OpDef& op = OpRegistry::global().get(name);
    Attrs attrs;
    for (const AttrSpec& s : *op.attr_schema) {
      if (!a.contains(s.name)) continue;
      const json& v = a.at(s.name);
      switch (s.type) {
        case AttrType::boolean:
          attrs.set(s.name, v.get<bool>());
          break;
        case AttrType::integer:
          attrs.set(s.name, v.get<int64_t>());
          break;
        case AttrType::real:
          attrs.set(s.name, v.get<double>());
          break;
        case AttrType::int_list:
          attrs.set(s.name, to_shape(v.get<Ints>()));
          break;
        default:
          ADD_FAILURE() << "registered(" << name << "): attribute " << s.name;
      }
    }
    return dispatch(op, x, attrs);
  });
}

const std::map<std::string, OpEntry>& op_table() {
  static const std::map<std::string, OpEntry> table = [] {
    std::map<std::string, OpEntry> t;
    // Elementwise binary.
    t["add"] = binary_alpha(&lathe::add);
    t["sub"] = binary_alpha(&lathe::sub);
    t["mul"] = binary<Bin>(&lathe::mul);
    t["div"] = binary<Bin>(&lathe::div);
    t["pow"] = binary<Bin>(&lathe::pow);
    t["maximum"] = binary<Bin>(&lathe::maximum);
    t["minimum"] = binary<Bin>(&lathe::minimum);
    t["add_scalar"] = scalar<Sc>(&lathe::add);
    t["sub_scalar"] = scalar<Sc>(&lathe::sub);
    t["rsub_scalar"] = scalar<Sc>(&lathe::rsub);
    t["mul_scalar"] = scalar<Sc>(&lathe::mul);
    t["div_scalar"] = scalar<Sc>(&lathe::div);
    t["pow_scalar"] = scalar<Sc>(&lathe::pow);
    // Comparisons and where.
    t["eq"] = binary<Bin>(&lathe::eq);
    t["ne"] = binary<Bin>(&lathe::ne);
    t["lt"] = binary<Bin>(&lathe::lt);
    t["le"] = binary<Bin>(&lathe::le);
    t["gt"] = binary<Bin>(&lathe::gt);
    t["ge"] = binary<Bin>(&lathe::ge);
    t["eq_scalar"] = scalar<Sc>(&lathe::eq);
    t["ne_scalar"] = scalar<Sc>(&lathe::ne);
    t["lt_scalar"] = scalar<Sc>(&lathe::lt);
    t["le_scalar"] = scalar<Sc>(&lathe::le);
    t["gt_scalar"] = scalar<Sc>(&lathe::gt);
    t["ge_scalar"] = scalar<Sc>(&lathe::ge);
    t["logical_not"] = unary<Un>(&lathe::logical_not);
    {
      auto f = static_cast<Tensor (*)(T, T, T)>(&lathe::where);
      t["where"] = {linked(f), [f](Tensors& x, Tensors&, const json&) -> Tensors {
                      return {f(x[0], x[1], x[2])};
                    }};
      auto g = static_cast<Tensor (*)(T, T, double)>(&lathe::where);
      t["where_scalar"] = {linked(g), [g](Tensors& x, Tensors&, const json& a) -> Tensors {
                             return {g(x[0], x[1], a.at("other").get<double>())};
                           }};
    }
    // Unary.
    t["neg"] = unary<Un>(&lathe::neg);
    t["abs"] = unary<Un>(&lathe::abs);
    t["exp"] = unary<Un>(&lathe::exp);
    t["log"] = unary<Un>(&lathe::log);
    t["sqrt"] = unary<Un>(&lathe::sqrt);
    t["rsqrt"] = unary<Un>(&lathe::rsqrt);
    t["tanh"] = unary<Un>(&lathe::tanh);
    t["sigmoid"] = unary<Un>(&lathe::sigmoid);
    t["erf"] = unary<Un>(&lathe::erf);
    t["relu"] = unary<Un>(&lathe::relu);
    t["relu6"] = unary<Un>(&lathe::relu6);
    t["hardswish"] = unary<Un>(&lathe::hardswish);
    t["hardsigmoid"] = unary<Un>(&lathe::hardsigmoid);
    t["silu"] = unary<Un>(&lathe::silu);
    t["hardtanh"] = {
        linked(&lathe::hardtanh), [](Tensors& x, Tensors&, const json& a) -> Tensors {
          return {lathe::hardtanh(x[0], a.value("min_val", -1.0), a.value("max_val", 1.0))};
        }};
    t["gelu"] = {linked(&lathe::gelu), [](Tensors& x, Tensors&, const json& a) -> Tensors {
                   return {lathe::gelu(x[0], a.value("approximate", std::string("none")))};
                 }};
    t["clamp"] = {linked(&lathe::clamp), [](Tensors& x, Tensors&, const json& a) -> Tensors {
                    return {lathe::clamp(x[0], opt_double(a, "min"), opt_double(a, "max"))};
                  }};
    // In place: the result and the base of the mutated input.
    t["add_"] = {linked(&lathe::add_), [](Tensors& x, Tensors& b, const json& a) -> Tensors {
                   Tensor& r = lathe::add_(x[0], x[1], a.value("alpha", 1.0));
                   return {r, b[0]};
                 }};
    t["mul_"] = {linked(&lathe::mul_), [](Tensors& x, Tensors& b, const json& a) -> Tensors {
                   Tensor& r = lathe::mul_(x[0], a.at("other").get<double>());
                   return {r, b[0]};
                 }};
    t["relu_"] = {linked(&lathe::relu_), [](Tensors& x, Tensors& b, const json&) -> Tensors {
                    Tensor& r = lathe::relu_(x[0]);
                    return {r, b[0]};
                  }};
    // The functional forms of the in-place ops, and the scatter of a view's new value.
    for (const char* op : {"fill", "copy", "batch_norm_functional"}) t[op] = registered(op);
    t["mul_scalar_op"] = registered("mul_scalar");  // "mul_scalar" cases call mul(x, double)
    t["as_strided_scatter"] = method([](Tensors& x, const json& a) -> Tensors {
      return {lathe::as_strided_scatter(x[0], x[1], to_shape(a.at("size").get<Ints>()),
                                        to_shape(a.at("stride").get<Ints>()),
                                        a.at("offset").get<int64_t>())};
    });
    t["copy_"] = {true, [](Tensors& x, Tensors& b, const json&) -> Tensors {
                    Tensor& r = x[0].copy_(x[1]);
                    return {r, b[0]};
                  }};
    t["fill_"] = {true, [](Tensors& x, Tensors& b, const json& a) -> Tensors {
                    Tensor& r = x[0].fill_(a.at("value").get<double>());
                    return {r, b[0]};
                  }};
    // Linear algebra, convolution, pooling.
    t["matmul"] = binary<Bin>(&lathe::matmul);
    t["linear"] = {linked(&lathe::linear), [](Tensors& x, Tensors&, const json&) -> Tensors {
                     return {lathe::linear(x[0], x[1], x[2])};
                   }};
    t["conv2d"] = {linked(&lathe::conv2d), [](Tensors& x, Tensors&, const json& a) -> Tensors {
                     return {lathe::conv2d(
                         x[0], x[1], x[2], a.at("stride").get<Ints>(), a.at("padding").get<Ints>(),
                         a.at("dilation").get<Ints>(), a.at("groups").get<int64_t>())};
                   }};
    t["max_pool2d"] = {
        linked(&lathe::max_pool2d), [](Tensors& x, Tensors&, const json& a) -> Tensors {
          return {lathe::max_pool2d(x[0], a.at("kernel").get<Ints>(), a.at("stride").get<Ints>(),
                                    a.at("padding").get<Ints>(), a.at("dilation").get<Ints>(),
                                    a.at("ceil_mode").get<bool>())};
        }};
    t["avg_pool2d"] = {
        linked(&lathe::avg_pool2d), [](Tensors& x, Tensors&, const json& a) -> Tensors {
          return {lathe::avg_pool2d(x[0], a.at("kernel").get<Ints>(), a.at("stride").get<Ints>(),
                                    a.at("padding").get<Ints>(), a.at("ceil_mode").get<bool>(),
                                    a.at("count_include_pad").get<bool>())};
        }};
    t["adaptive_avg_pool2d"] = {
        linked(&lathe::adaptive_avg_pool2d), [](Tensors& x, Tensors&, const json& a) -> Tensors {
          return {lathe::adaptive_avg_pool2d(x[0], a.at("output_size").get<Ints>())};
        }};
    // Normalization: batch_norm in training mode also returns the updated running stats.
    t["batch_norm"] = {
        linked(&lathe::batch_norm), [](Tensors& x, Tensors&, const json& a) -> Tensors {
          bool training = a.at("training").get<bool>();
          Tensor y = lathe::batch_norm(x[0], x[1], x[2], x[3], x[4], training,
                                       a.at("momentum").get<double>(), a.at("eps").get<double>());
          if (training && x[1].defined()) return {y, x[1], x[2]};
          return {y};
        }};
    t["layer_norm"] = {linked(&lathe::layer_norm),
                       [](Tensors& x, Tensors&, const json& a) -> Tensors {
                         return {lathe::layer_norm(x[0], a.at("normalized_shape").get<Ints>(), x[1],
                                                   x[2], a.at("eps").get<double>())};
                       }};
    t["softmax"] = softmax_like(&lathe::softmax);
    t["log_softmax"] = softmax_like(&lathe::log_softmax);
    t["dropout"] = {
        linked(&lathe::dropout), [](Tensors& x, Tensors&, const json& a) -> Tensors {
          return {lathe::dropout(x[0], a.at("p").get<double>(), a.at("training").get<bool>())};
        }};
    t["embedding"] = binary<Bin>(&lathe::embedding);
    t["nll_loss"] = loss(&lathe::nll_loss);
    t["cross_entropy"] = loss(&lathe::cross_entropy);
    t["scaled_dot_product_attention"] = {
        linked(&lathe::scaled_dot_product_attention),
        [](Tensors& x, Tensors&, const json& a) -> Tensors {
          return {lathe::scaled_dot_product_attention(
              x[0], x[1], x[2], x[3], a.value("is_causal", false), opt_double(a, "scale"))};
        }};
    // Shape ops.
    t["cat"] = {linked(&lathe::cat), [](Tensors& x, Tensors&, const json& a) -> Tensors {
                  return {lathe::cat(x, a.at("dim").get<int64_t>())};
                }};
    t["stack"] = {linked(&lathe::stack), [](Tensors& x, Tensors&, const json& a) -> Tensors {
                    return {lathe::stack(x, a.at("dim").get<int64_t>())};
                  }};
    {
      auto by_size = static_cast<Tensors (*)(T, int64_t, int64_t)>(&lathe::split);
      auto by_sizes = static_cast<Tensors (*)(T, const Ints&, int64_t)>(&lathe::split);
      t["split"] = {linked(by_size) && linked(by_sizes),
                    [by_size, by_sizes](Tensors& x, Tensors&, const json& a) -> Tensors {
                      int64_t dim = a.at("dim").get<int64_t>();
                      if (a.contains("sizes"))
                        return by_sizes(x[0], a.at("sizes").get<Ints>(), dim);
                      return by_size(x[0], a.at("split_size").get<int64_t>(), dim);
                    }};
    }
    t["chunk"] = {linked(&lathe::chunk), [](Tensors& x, Tensors&, const json& a) -> Tensors {
                    return lathe::chunk(x[0], a.at("chunks").get<int64_t>(),
                                        a.at("dim").get<int64_t>());
                  }};
    // Reductions.
    t["sum"] = reduction(&lathe::sum);
    t["mean"] = reduction(&lathe::mean);
    t["amax"] = reduction(&lathe::amax);
    t["amin"] = reduction(&lathe::amin);
    t["max"] = reduction_dim(&lathe::max);
    t["min"] = reduction_dim(&lathe::min);
    t["argmax"] = reduction_dim(&lathe::argmax);
    t["argmin"] = reduction_dim(&lathe::argmin);
    t["var"] = variance(&lathe::var);
    t["std"] = variance(&lathe::std_dev);
    // Views and copies (Tensor methods).
    t["view"] = method([](Tensors& x, const json& a) -> Tensors {
      return {x[0].view(to_shape(a.at("size").get<Ints>()))};
    });
    t["reshape"] = method([](Tensors& x, const json& a) -> Tensors {
      return {x[0].reshape(to_shape(a.at("size").get<Ints>()))};
    });
    t["permute"] = method([](Tensors& x, const json& a) -> Tensors {
      return {x[0].permute(a.at("dims").get<Ints>())};
    });
    t["transpose"] = method([](Tensors& x, const json& a) -> Tensors {
      return {x[0].transpose(a.at("dims")[0].get<int64_t>(), a.at("dims")[1].get<int64_t>())};
    });
    t["t"] = method([](Tensors& x, const json&) -> Tensors { return {x[0].t()}; });
    t["narrow"] = method([](Tensors& x, const json& a) -> Tensors {
      return {x[0].narrow(a.at("dim").get<int64_t>(), a.at("start").get<int64_t>(),
                          a.at("length").get<int64_t>())};
    });
    t["slice"] = method([](Tensors& x, const json& a) -> Tensors {
      return {x[0].slice(a.at("dim").get<int64_t>(), a.at("start").get<int64_t>(),
                         a.at("end").get<int64_t>(), a.at("step").get<int64_t>())};
    });
    t["select"] = method([](Tensors& x, const json& a) -> Tensors {
      return {x[0].select(a.at("dim").get<int64_t>(), a.at("index").get<int64_t>())};
    });
    t["expand"] = method([](Tensors& x, const json& a) -> Tensors {
      return {x[0].expand(to_shape(a.at("size").get<Ints>()))};
    });
    t["squeeze"] = method([](Tensors& x, const json& a) -> Tensors {
      if (a.contains("dim")) return {x[0].squeeze(a.at("dim").get<int64_t>())};
      return {x[0].squeeze()};
    });
    t["unsqueeze"] = method([](Tensors& x, const json& a) -> Tensors {
      return {x[0].unsqueeze(a.at("dim").get<int64_t>())};
    });
    t["flatten"] = method([](Tensors& x, const json& a) -> Tensors {
      return {x[0].flatten(a.value("start_dim", int64_t{0}), a.value("end_dim", int64_t{-1}))};
    });
    t["as_strided"] = method([](Tensors& x, const json& a) -> Tensors {
      return {x[0].as_strided(to_shape(a.at("size").get<Ints>()),
                              to_shape(a.at("stride").get<Ints>()), a.at("offset").get<int64_t>())};
    });
    t["contiguous"] =
        method([](Tensors& x, const json&) -> Tensors { return {x[0].contiguous()}; });
    t["clone"] = method([](Tensors& x, const json&) -> Tensors { return {x[0].clone()}; });
    t["to_channels_last"] =
        method([](Tensors& x, const json&) -> Tensors { return {x[0].to_channels_last()}; });
    t["to"] = method([](Tensors& x, const json& a) -> Tensors {
      return {x[0].to(parse_dtype(a.at("dtype").get<std::string>()))};
    });
    // Factories.
    t["zeros"] = method([](Tensors&, const json& a) -> Tensors {
      return {lathe::zeros(to_shape(a.at("size").get<Ints>()),
                           parse_dtype(a.at("dtype").get<std::string>()))};
    });
    t["ones"] = method([](Tensors&, const json& a) -> Tensors {
      return {lathe::ones(to_shape(a.at("size").get<Ints>()),
                          parse_dtype(a.at("dtype").get<std::string>()))};
    });
    t["full"] = method([](Tensors&, const json& a) -> Tensors {
      return {lathe::full(to_shape(a.at("size").get<Ints>()), a.at("value").get<double>(),
                          parse_dtype(a.at("dtype").get<std::string>()))};
    });
    t["arange"] = method([](Tensors&, const json& a) -> Tensors {
      if (!a.contains("start")) return {lathe::arange(a.at("end").get<int64_t>())};
      return {lathe::arange(a.at("start").get<double>(), a.at("end").get<double>(),
                            a.at("step").get<double>(),
                            parse_dtype(a.at("dtype").get<std::string>()))};
    });
    return t;
  }();
  return table;
}

// ---------------------------------------------------------------------------------------------
// Comparison.
// ---------------------------------------------------------------------------------------------

bool close(double got, double want, double rtol, double atol) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

// Empty when `got` matches `want` (dtype, shape, values); else what differs.
std::string compare(const Tensor& got, const Tensor& want, double rtol, double atol) {
  if (!got.defined()) return "output is an undefined tensor";
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return detail::str("got ", got.shape_string(), ", expected ", want.shape_string());
  const bool exact = !is_floating(want.dtype());
  std::vector<double> g = got.to_vector<double>();
  std::vector<double> w = want.to_vector<double>();
  int64_t bad = 0;
  double worst = -1;
  size_t worst_i = 0;
  std::string first;
  for (size_t i = 0; i < w.size(); ++i) {
    bool ok = exact ? (g[i] == w[i]) : close(g[i], w[i], rtol, atol);
    if (ok) continue;
    ++bad;
    double err = std::isfinite(g[i] - w[i]) ? std::abs(g[i] - w[i])
                                            : std::numeric_limits<double>::infinity();
    if (err > worst) worst = err, worst_i = i;
    if (bad <= 4) first += detail::str(" [", i, "] got ", g[i], " want ", w[i], ";");
  }
  if (bad == 0) return "";
  return detail::str(bad, " of ", w.size(), " elements of ", want.shape_string(), " differ (rtol ",
                     rtol, ", atol ", atol, "); worst at flat index ", worst_i, ": got ",
                     g[worst_i], ", want ", w[worst_i], "; first:", first);
}

// Strides of dims with more than one element, and the offset of non-empty tensors, must be
// torch's (size-1 and empty dims have arbitrary strides).
std::string compare_layout(const Tensor& got, const json& out) {
  Ints want = out.at("strides").get<Ints>();
  Ints gs = got.int_strides();
  Ints sz = got.shape();
  if (want.size() != gs.size()) return "rank differs from torch's";
  for (size_t d = 0; d < sz.size(); ++d) {
    if (sz[d] > 1 && gs[d] != want[d])
      return detail::str("strides ", gs, ", torch has ", want, " (sizes ", sz, ")");
  }
  if (got.numel() > 0 && got.storage_offset() != out.at("offset").get<int64_t>())
    return detail::str("storage offset ", got.storage_offset(), ", torch has ",
                       out.at("offset").get<int64_t>());
  return "";
}

// Dropout in training mode cannot match torch's random mask: check that about p of the
// elements are zero, that the kept ones are x / (1 - p), and that two calls draw new masks.
void check_dropout_stats(const json& c, const Tensor& x) {
  ASSERT_TRUE(linked(&lathe::dropout)) << "lathe::dropout is not linked (not implemented)";
  const double p = c.at("attrs").at("p").get<double>();
  Tensor y = lathe::dropout(x, p, true);
  Tensor y2 = lathe::dropout(x, p, true);
  ASSERT_EQ(y.shape(), x.shape());
  ASSERT_EQ(y.dtype(), x.dtype());
  std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>(),
                      y2v = y2.to_vector<double>();
  int64_t zeros = 0, wrong = 0, differ = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0) {
      ++zeros;
    } else if (!close(yv[i], xv[i] / (1 - p), 1e-6, 1e-7)) {
      ++wrong;
    }
    differ += (yv[i] == 0) != (y2v[i] == 0);
  }
  const double frac = static_cast<double>(zeros) / static_cast<double>(xv.size());
  // 20000 elements: the standard deviation of frac is <= 0.0036; allow about 6 of them.
  EXPECT_NEAR(frac, p, 0.02) << "fraction of zeroed elements";
  EXPECT_EQ(wrong, 0) << "kept elements must be scaled by 1/(1-p)";
  EXPECT_GT(differ, 0) << "two dropout calls drew the same mask";
}

// ---------------------------------------------------------------------------------------------
// The test: one per case.
// ---------------------------------------------------------------------------------------------

// The inputs of case `name` (undefined tensors for null inputs) and their bases: fresh copies of
// the stored bases on `device` (so in-place ops never write into the loaded data), with the case's
// views re-applied.
void make_inputs(const OracleData& data, const std::string& name, Tensors& xs, Tensors& bases,
                 Device device = Device::cpu()) {
  const json& ins = data.cases.at(name).at("inputs");
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].is_null()) {
      xs.emplace_back();
      bases.emplace_back();
      continue;
    }
    const Tensor& stored = data.file.tensors.at(name + ".in." + std::to_string(i));
    Tensor base = device.kind() == DeviceKind::cpu ? stored.clone() : stored.to(device);
    bases.push_back(base);
    xs.push_back(apply_views(base, ins[i].at("views")));
  }
}

// Skips (outside CI) or fails (in CI) a test when the oracle file could not be made; a macro
// because GTEST_SKIP and FAIL return from the test body.
#define REQUIRE_ORACLE(data)                                              \
  do {                                                                    \
    if (!(data).available) {                                              \
      if ((data).skip && !running_in_ci()) GTEST_SKIP() << (data).reason; \
      FAIL() << (data).reason;                                            \
    }                                                                     \
  } while (0)

class OpOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(OpOracle, MatchesTorch) {
  const OracleData& data = oracle_data();
  REQUIRE_ORACLE(data);
  const std::string& name = GetParam();
  const json& c = data.cases.at(name);
  const std::string op = c.at("op").get<std::string>();
  SCOPED_TRACE("case " + name + ": op " + op + " attrs " + c.at("attrs").dump());

  Tensors xs, bases;
  make_inputs(data, name, xs, bases);

  if (op == "dropout_stats") {
    check_dropout_stats(c, xs.at(0));
    return;
  }
  auto it = op_table().find(op);
  ASSERT_NE(it, op_table().end()) << "no entry for op '" << op << "' in the oracle's op table";
  ASSERT_TRUE(it->second.linked) << "the ops.h function for '" << op
                                 << "' is not linked (not implemented yet)";
  Tensors outs;
  try {
    outs = it->second.run(xs, bases, c.at("attrs"));
  } catch (const std::exception& e) {
    FAIL() << "lathe threw: " << e.what();
  }

  const json& out_desc = c.at("outputs");
  ASSERT_EQ(outs.size(), out_desc.size()) << "number of outputs";
  const double rtol = c.at("rtol").get<double>(), atol = c.at("atol").get<double>();
  for (size_t j = 0; j < outs.size(); ++j) {
    const Tensor& want = data.file.tensors.at(name + ".out." + std::to_string(j));
    std::string diff = compare(outs[j], want, rtol, atol);
    if (!diff.empty()) {
      ADD_FAILURE() << "output " << j << ": " << diff;
      continue;
    }
    if (c.value("check_strides", false)) {
      std::string layout = compare_layout(outs[j], out_desc[j]);
      if (!layout.empty()) ADD_FAILURE() << "output " << j << " layout: " << layout;
    }
    if (c.value("aliases", false)) {
      EXPECT_TRUE(outs[j].has_storage() && xs[0].has_storage() &&
                  outs[j].impl().storage == xs[0].impl().storage)
          << "output " << j << " should be a view sharing the input's storage";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, OpOracle, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// ---------------------------------------------------------------------------------------------
// Layout agreement (issue 11): every case run eagerly, through lathe::compile (trace once) and on
// the lazy device gives outputs with the same strides (dims of one element excepted, as torch
// leaves them arbitrary), since all three modes ask one layout rule and reshape decides
// view-or-copy from the real strides.
// ---------------------------------------------------------------------------------------------

std::string stride_mismatch(const Tensor& got, const Tensor& want, const char* mode) {
  if (got.dim() != want.dim()) return detail::str(mode, ": rank ", got.dim(), " vs ", want.dim());
  const Ints sz = want.shape(), gs = got.int_strides(), ws = want.int_strides();
  for (size_t d = 0; d < sz.size(); ++d)
    if (sz[d] > 1 && gs[d] != ws[d])
      return detail::str(mode, ": strides ", gs, ", eager has ", ws, " (sizes ", sz, ")");
  return "";
}

class LayoutAgreement : public ::testing::TestWithParam<std::string> {};

TEST_P(LayoutAgreement, EagerCompileAndLazyGiveTheSameStrides) {
  const OracleData& data = oracle_data();
  REQUIRE_ORACLE(data);
  const std::string& name = GetParam();
  const json& c = data.cases.at(name);
  const std::string op = c.at("op").get<std::string>();
  SCOPED_TRACE("case " + name + ": op " + op + " attrs " + c.at("attrs").dump());
  if (op == "dropout_stats") {
    // The mask is random; the layout is that of x in every mode (checked on the model zoo).
    return;
  }
  auto it = op_table().find(op);
  ASSERT_NE(it, op_table().end());
  const OpEntry& entry = it->second;
  const json& attrs = c.at("attrs");

  Tensors xs, bases;
  make_inputs(data, name, xs, bases);
  const Tensors eager = entry.run(xs, bases, attrs);

  // Trace once: defined inputs are arguments, bases are captured (in-place cases return them).
  Tensors cxs, cbases;
  make_inputs(data, name, cxs, cbases);
  std::vector<Arg> args;
  std::vector<std::pair<size_t, Tensor>> traced;  // output index, fake
  for (const Tensor& x : cxs)
    if (x.defined()) args.emplace_back(x);
  auto f = compile([&](const std::vector<Arg>& a) {
    Tensors ins;
    size_t k = 0;
    for (const Tensor& x : cxs) ins.push_back(x.defined() ? std::get<Tensor>(a[k++]) : Tensor());
    Tensors outs = entry.run(ins, cbases, attrs);
    for (size_t j = 0; j < outs.size(); ++j)  // while tracing: the fakes (static sizes at first)
      if (outs[j].defined() && !outs[j].has_storage()) traced.emplace_back(j, outs[j]);
    return outs;
  });
  Tensors compiled;
  try {
    compiled = f(args);
  } catch (const std::exception& e) {
    FAIL() << "compile threw: " << e.what();
  }

  Tensors lxs, lbases;
  make_inputs(data, name, lxs, lbases, Device::lazy());
  Tensors lazy_out;
  try {
    lazy_out = entry.run(lxs, lbases, attrs);
  } catch (const std::exception& e) {
    FAIL() << "lazy threw: " << e.what();
  }
  ASSERT_EQ(compiled.size(), eager.size());
  ASSERT_EQ(lazy_out.size(), eager.size());
  std::vector<std::string> pending(eager.size());  // the strides lazy tensors show before sync
  for (size_t j = 0; j < eager.size(); ++j)
    pending[j] = stride_mismatch(lazy_out[j], eager[j], "lazy (pending)");
  for (const auto& [j, fake] : traced)
    EXPECT_EQ(stride_mismatch(fake, eager.at(j), "compile (traced)"), "") << "output " << j;
  for (size_t j = 0; j < eager.size(); ++j) {
    EXPECT_EQ(stride_mismatch(compiled[j], eager[j], "compile"), "") << "output " << j;
    EXPECT_EQ(pending[j], "") << "output " << j;
    lazy_out[j].raw_data();  // syncs: the strides the kernel gave
    EXPECT_EQ(stride_mismatch(lazy_out[j], eager[j], "lazy (after sync)"), "") << "output " << j;
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, LayoutAgreement, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// ---------------------------------------------------------------------------------------------
// The cpu backend's planned executor (issue 12): every case compiled with backend "cpu" gives
// eager's results on the first call (which records the plan) and on the second (which runs it
// from the arena), the captured bases reset to the case's data in between.
// ---------------------------------------------------------------------------------------------

class ExecutorAgreement : public ::testing::TestWithParam<std::string> {};

TEST_P(ExecutorAgreement, CpuBackendEqualsEagerWhenRecordingAndWhenPlanned) {
  const OracleData& data = oracle_data();
  REQUIRE_ORACLE(data);
  const std::string& name = GetParam();
  const json& c = data.cases.at(name);
  const std::string op = c.at("op").get<std::string>();
  SCOPED_TRACE("case " + name + ": op " + op + " attrs " + c.at("attrs").dump());
  if (op == "dropout_stats") return;  // random: checked by OpOracle
  auto it = op_table().find(op);
  ASSERT_NE(it, op_table().end());
  const OpEntry& entry = it->second;
  const json& attrs = c.at("attrs");
  const double rtol = c.at("rtol").get<double>(), atol = c.at("atol").get<double>();

  Tensors xs, bases;
  make_inputs(data, name, xs, bases);
  const Tensors eager = entry.run(xs, bases, attrs);

  Tensors cxs, cbases;
  make_inputs(data, name, cxs, cbases);
  std::vector<Arg> args;
  for (const Tensor& x : cxs)
    if (x.defined()) args.emplace_back(x);
  CompileOptions o;
  o.backend = "cpu";
  auto f = compile(
      [&](const std::vector<Arg>& a) {
        Tensors ins;
        size_t k = 0;
        for (const Tensor& x : cxs)
          ins.push_back(x.defined() ? std::get<Tensor>(a[k++]) : Tensor());
        return entry.run(ins, cbases, attrs);
      },
      o);
  for (int call = 0; call < 2; ++call) {
    const json& ins = c.at("inputs");
    for (size_t i = 0; i < ins.size(); ++i)  // the case's data again (in-place cases wrote)
      if (!ins[i].is_null())
        cbases[i].copy_(data.file.tensors.at(name + ".in." + std::to_string(i)));
    Tensors got;
    try {
      got = f(args);
    } catch (const std::exception& e) {
      FAIL() << "call " << call << " threw: " << e.what();
    }
    ASSERT_EQ(got.size(), eager.size());
    for (size_t j = 0; j < got.size(); ++j) {
      std::string diff = compare(got[j], eager[j], rtol, atol);
      EXPECT_EQ(diff, "") << "call " << call << " output " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, ExecutorAgreement, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// The generator's coverage: every op of the table has cases, so an op added to the table
// without cases (or dropped from the generator) shows up.
TEST(OpOracleCoverage, EveryTableOpHasCases) {
  const OracleData& data = oracle_data();
  REQUIRE_ORACLE(data);
  std::map<std::string, int> counts;
  for (const auto& [name, c] : data.cases) counts[c.at("op").get<std::string>()]++;
  for (const auto& [op, entry] : op_table()) EXPECT_GT(counts[op], 0) << "no cases for " << op;
  EXPECT_GT(data.cases.size(), 500u);
}

// Registered ops that no oracle case can reach, each with the reason. A new op must get cases
// in gen_ops.py (or an entry here with a reason), else OpOracleCoverage.EveryRegisteredOpHasCases
// fails.
const std::map<std::string, std::string>& ops_without_oracle_cases() {
  static const std::map<std::string, std::string> m = {
      {"detach",
       "dispatched only while tracing (Tensor::detach under lathe::compile; eagerly detach is an "
       "alias without autograd state, no op); tests/autograd/test_aot_eager_twins.cpp checks "
       "compiled detach against eager"},
      {"conv2d_fused",
       "a fusion of the cpu backend (conv2d + batch_norm + relu/hardtanh + add) with no single "
       "PyTorch op; tests/backend/test_cpu_backend.cpp checks it against those ops, each of "
       "which has oracle cases, and the zoo compiled with it against eager"},
      {"linear_fused",
       "a fusion of the cpu backend (linear + relu/gelu + add) with no single PyTorch op; "
       "tests/backend/test_cpu_backend.cpp checks it against those ops, each with oracle cases"},
      {"sdpa_fused",
       "a fusion of the cpu backend (matmul + scale + mask add + softmax + matmul, what "
       "scaled_dot_product_attention composes) with no single PyTorch op; "
       "tests/backend/test_attention.cpp checks it against those ops, each with oracle cases"},
      {"to_blocked",
       "a layout change of the cpu backend (oneDNN's nChw8c / nChw16c) with no PyTorch op; "
       "tests/backend/test_plan_layouts.cpp runs graphs with it against eager"},
      {"from_blocked", "the inverse of to_blocked; tests/backend/test_plan_layouts.cpp"},
      {"conv2d_blocked",
       "conv2d_fused on oneDNN's blocked layouts (cpu backend's plan_layouts); "
       "tests/backend/test_plan_layouts.cpp checks it against conv2d_fused"},
      {"conv2d_1x1_dw_blocked",
       "a 1x1 conv2d_blocked and the 3x3 depthwise one reading it as one oneDNN primitive (cpu "
       "backend's fuse_dw_conv) with no single PyTorch op; tests/backend/test_fuse_dw_conv.cpp "
       "checks graphs with it against the interpreter on the unfused graph"},
      {"pointwise_fused",
       "a chain of pointwise ops as one program (cpu backend's fuse_pointwise) with no single "
       "PyTorch op; tests/backend/test_fuse_pointwise.cpp checks every instruction against the "
       "eager op, each of which has oracle cases"},
      {"max_pool2d_blocked",
       "max_pool2d on oneDNN's blocked layouts (cpu backend's plan_layouts / concat_blocked); "
       "tests/backend/test_plan_layouts.cpp and test_concat_blocked.cpp check it against "
       "max_pool2d"},
  };
  // The gradient ops that vjp rules call (lathe/ops/backward_ops.h) are PyTorch's gradients,
  // not ops of torch's functional API: tests/autograd/test_grads_oracle.cpp checks them against
  // torch.autograd, and tests/autograd/test_gradcheck.cpp against finite differences.
  static const std::map<std::string, std::string> with_gradients = [] {
    std::map<std::string, std::string> r = m;
    for (const char* op : {"conv2d_backward_input", "conv2d_backward_weight", "max_pool2d_backward",
                           "avg_pool2d_backward", "adaptive_avg_pool2d_backward",
                           "embedding_backward", "batch_norm_backward"})
      r[op] = "a gradient op, checked against torch.autograd by tests/autograd";
    return r;
  }();
  return with_gradients;
}

// The ops a case dispatches at top level (nested dispatches from inside a kernel are not counted,
// since the case compares only the outer op's result).
thread_local std::set<std::string>* tls_dispatched = nullptr;

class RecordAndRunMode : public DispatchMode {
 public:
  std::vector<Tensor> dispatch(const OpDef& op, TensorList inputs, const Attrs& attrs,
                               std::vector<TensorMeta>&& metas) override {
    tls_dispatched->insert(op.name);
    ModeGuard eager(nullptr);  // nested dispatches run eagerly, unrecorded
    std::vector<Tensor> out = op.kernel(inputs, attrs, metas);
    for (int i : op.mutated_inputs)
      if (i < static_cast<int>(inputs.size()) && inputs[i].defined()) inputs[i].bump_version();
    return out;
  }
};

// Registry -> oracle: every op in OpRegistry is dispatched by at least one oracle case (run here
// with a recording dispatch mode), so an op registered without PyTorch cases fails this test.
TEST(OpOracleCoverage, EveryRegisteredOpHasCases) {
  const OracleData& data = oracle_data();
  REQUIRE_ORACLE(data);
  std::map<std::string, std::vector<std::string>> cases_of;  // registry op -> case names
  for (const std::string& name : data.order) {
    const json& c = data.cases.at(name);
    const std::string op = c.at("op").get<std::string>();
    std::set<std::string> dispatched;
    Tensors xs, bases;
    make_inputs(data, name, xs, bases);
    tls_dispatched = &dispatched;
    RecordAndRunMode mode;
    std::optional<ModeGuard> recording(&mode);
    try {
      if (op == "dropout_stats") {
        lathe::dropout(xs.at(0), c.at("attrs").at("p").get<double>(), true);
      } else if (auto it = op_table().find(op); it != op_table().end() && it->second.linked) {
        it->second.run(xs, bases, c.at("attrs"));
      }
    } catch (const std::exception&) {
      // The case itself reports the failure (OpOracle.MatchesTorch); the ops it reached count.
    }
    recording.reset();
    tls_dispatched = nullptr;
    for (const std::string& d : dispatched) cases_of[d].push_back(name);
  }
  const auto& exempt = ops_without_oracle_cases();
  const std::vector<std::string> registered = OpRegistry::global().names();
  EXPECT_GT(registered.size(), 20u);
  for (const std::string& op : registered) {
    auto ex = exempt.find(op);
    if (ex != exempt.end()) {
      EXPECT_EQ(cases_of.count(op), 0u)
          << "op '" << op << "' is listed as having no oracle case (" << ex->second << ") but case "
          << cases_of[op].front() << " dispatches it: drop it from the list";
      continue;
    }
    EXPECT_GT(cases_of[op].size(), 0u)
        << "registered op '" << op << "' is dispatched by no case of tests/oracle/gen_ops.py: "
        << "add PyTorch cases there (and an entry in op_table()), or list it with a reason in "
        << "ops_without_oracle_cases()";
  }
  for (const auto& [op, reason] : exempt)
    EXPECT_NE(OpRegistry::global().find(op), nullptr)
        << "ops_without_oracle_cases() lists '" << op << "', which is no longer registered";
}

}  // namespace
}  // namespace lathe::oracle
