// Elementwise ops: binary (with broadcasting and type promotion), scalar, comparison, unary,
// where, and in-place variants.
#include <bit>
#include <cmath>
#include <type_traits>

#include "lathe/kernels/elementwise.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"
#include "lathe/ops/shape_util.h"

namespace lathe {
namespace {

enum class BinKind { arith, divide, compare };

DType binary_compute_dtype(DType a, DType b, BinKind kind) {
  DType d = promote_types(a, b);
  if (kind == BinKind::divide && !is_floating(d)) d = DType::f32;
  return d;
}

ShapeRule binary_rule(const char* name, BinKind kind) {
  return [name, kind](TensorList in, const Attrs&) {
    Shape s = broadcast_shapes(in[0].sizes(), in[1].sizes(), name);
    DType d = binary_compute_dtype(in[0].dtype(), in[1].dtype(), kind);
    // A 0-dim CPU operand (a scalar) may join a tensor on another device.
    LATHE_CHECK(in[0].device() == in[1].device() || in[0].dim() == 0 || in[1].dim() == 0, "[", name,
                "] inputs are on different devices: ", in[0].device(), " and ", in[1].device());
    Device dev = in[0].dim() == 0 && in[1].dim() != 0 ? in[1].device() : in[0].device();
    return std::vector<TensorMeta>{result_meta(s, kind == BinKind::compare ? DType::b8 : d, dev)};
  };
}

// Runs f over broadcast inputs converted to the compute dtype, into outs[0].
template <class F>
OutKernel binary_out_kernel(const char* name, BinKind kind, F f) {
  return [name, kind, f](TensorList in, const Attrs& attrs, const std::vector<TensorMeta>& m,
                         TensorList outs) {
    DType cd = binary_compute_dtype(in[0].dtype(), in[1].dtype(), kind);
    Tensor a = kernels::broadcast_to(in[0].to(cd), m[0].sizes);
    Tensor b = kernels::broadcast_to(in[1].to(cd), m[0].sizes);
    const Tensor& out = outs[0];
    double alpha = attrs.has("alpha") ? attrs.get_double("alpha") : 1.0;
    LATHE_DISPATCH_ALL(cd, name, [&] {
      using T = scalar_t;
      if (kind == BinKind::compare) {
        kernels::map2<bool, T>(out, a, b,
                               [&](T x, T y) { return static_cast<bool>(f(x, y, T())); });
      } else if constexpr (std::is_same_v<T, bool>) {
        // bool arithmetic runs on ints: add is logical or, mul logical and.
        int al = alpha != 0 ? 1 : 0;
        kernels::map2<T, T>(out, a, b, [&](T x, T y) {
          return static_cast<bool>(f(static_cast<int>(x), static_cast<int>(y), al));
        });
      } else {
        T al = static_cast<T>(alpha);
        kernels::map2<T, T>(out, a, b, [&](T x, T y) { return static_cast<T>(f(x, y, al)); });
      }
    });
  };
}

// An allocating kernel over an out kernel whose single output takes the inputs' layout.
EagerKernel allocating(OutKernel out_kernel) {
  return [out_kernel](TensorList in, const Attrs& attrs, const std::vector<TensorMeta>& m) {
    Tensor out = alloc_output(m[0].sizes, m[0].dtype, in);
    out_kernel(in, attrs, m, {&out, 1});
    return std::vector<Tensor>{out};
  };
}

// with_alpha: the op takes an optional "alpha" (a + alpha*b, a - alpha*b).
template <class F>
void add_binary(OpRegistry& r, const char* name, BinKind kind, F f, bool with_alpha = false) {
  std::vector<AttrSpec> attrs;
  if (with_alpha) attrs.push_back(detail::optional("alpha", AttrType::real));
  OutKernel out = binary_out_kernel(name, kind, f);
  OpDef op = detail::define_op(name, 2, binary_rule(name, kind), allocating(out),
                               OpCategory::pointwise, std::move(attrs));
  r.add(std::move(op), std::move(out));
}

template <class T>
T py_pow(T x, T y) {
  if constexpr (std::is_same_v<T, bool>) {
    return x || !y;
  } else if constexpr (std::is_integral_v<T>) {
    if (y < 0) return x == 1 ? 1 : (x == -1 ? ((y % 2) ? -1 : 1) : 0);
    T r = 1;
    while (y) {
      if (y & 1) r *= x;
      x *= x;
      y >>= 1;
    }
    return r;
  } else {
    return std::pow(x, y);
  }
}

template <class T>
T nan_max(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  }
  return x > y ? x : y;
}
template <class T>
T nan_min(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  }
  return x < y ? x : y;
}

// ---- unary ----
enum class UnaryKind { keep, floating };

// `check` validates the attributes (hardtanh's bounds, gelu's form, ...).
ShapeRule unary_rule(const char* name, UnaryKind kind, std::function<void(const Attrs&)> check) {
  return [name, kind, check](TensorList in, const Attrs& attrs) {
    if (check) check(attrs);
    DType d = in[0].dtype();
    if (kind == UnaryKind::floating && !is_floating(d)) d = DType::f32;
    if (kind == UnaryKind::keep && d == DType::b8 && std::string(name) != "logical_not")
      throw Error(
          detail::str("[", name, "] is not supported for bool tensors: ", in[0].shape_string()));
    if (std::string(name) == "logical_not") d = DType::b8;
    return std::vector<TensorMeta>{result_meta(in[0].sizes(), d, in[0].device())};
  };
}

template <class F>
OutKernel unary_out_kernel(const char* name, F f) {
  return [name, f](TensorList in, const Attrs& attrs, const std::vector<TensorMeta>& m,
                   TensorList outs) {
    const Tensor& out = outs[0];
    if (m[0].dtype == DType::b8) {  // logical_not
      Tensor x = in[0];
      LATHE_DISPATCH_ALL(x.dtype(), name, [&] {
        kernels::map1<bool, scalar_t>(out, x, [](scalar_t v) { return !static_cast<bool>(v); });
      });
      return;
    }
    Tensor x = in[0].to(m[0].dtype);
    LATHE_DISPATCH_ALL(m[0].dtype, name, [&] {
      using T = scalar_t;
      if constexpr (!std::is_same_v<T, bool>) {
        // Attributes are read once here, never per element.
        auto fn = f(attrs);
        kernels::map1<T, T>(out, x, [&](T v) { return static_cast<T>(fn(v)); });
      }
    });
  };
}

template <class F>
void add_unary(OpRegistry& r, const char* name, UnaryKind kind, F f,
               std::vector<AttrSpec> attrs = {},
               std::function<void(const Attrs&)> check = nullptr) {
  OutKernel out = unary_out_kernel(name, f);
  OpDef op = detail::define_op(name, 1, unary_rule(name, kind, std::move(check)), allocating(out),
                               OpCategory::pointwise, std::move(attrs));
  r.add(std::move(op), std::move(out));
}

template <class T>
T fdiv_floor(T x) {
  return x;
}

// ---- where ----
std::vector<TensorMeta> where_rule(TensorList in, const Attrs&) {
  LATHE_CHECK(in[0].dtype() == DType::b8, "[where] condition must be bool, got ",
              in[0].shape_string());
  Shape s = broadcast_shapes(broadcast_shapes(in[0].sizes(), in[1].sizes(), "where"), in[2].sizes(),
                             "where");
  return {result_meta(s, promote_types(in[1].dtype(), in[2].dtype()), in[1].device())};
}

// cc ? x : y. For f32 / f64 a bit select rather than a branch: the relu vjp's mask is random, so
// a branch mispredicts half the time, and the select vectorizes.
template <class T>
T select(bool cc, T x, T y) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    const U m = U{0} - static_cast<U>(cc);
    return std::bit_cast<T>((std::bit_cast<U>(x) & m) | (std::bit_cast<U>(y) & ~m));
  } else {
    return cc ? x : y;
  }
}

void where_out_kernel(TensorList in, const Attrs&, const std::vector<TensorMeta>& m,
                      TensorList outs) {
  Tensor c = kernels::broadcast_to(in[0], m[0].sizes);
  Tensor a = kernels::broadcast_to(in[1].to(m[0].dtype), m[0].sizes);
  Tensor b = kernels::broadcast_to(in[2].to(m[0].dtype), m[0].sizes);
  LATHE_DISPATCH_ALL(m[0].dtype, "where", [&] {
    using T = scalar_t;
    kernels::map3<T, bool, T>(outs[0], c, a, b, [](bool cc, T x, T y) { return select(cc, x, y); });
  });
}

// ---- in-place ----
std::vector<TensorMeta> inplace_rule(TensorList in, const Attrs&) {
  const Tensor& self = in[0];
  if (in.size() > 1) {
    Shape s = broadcast_shapes(self.sizes(), in[1].sizes(), "add_");
    LATHE_CHECK(s == self.sizes(), "[add_] other ", in[1].shape_string(), " would broadcast self ",
                self.shape_string(), " to ", s, "; an in-place op cannot change self's shape");
    // PyTorch's can_cast: a float result does not go into an integer self, nor a number into
    // a bool self; within floats (f32 into bf16, ...) the result is rounded.
    DType d = promote_types(self.dtype(), in[1].dtype());
    const bool narrows_kind = (is_floating(d) && !is_floating(self.dtype())) ||
                              (d != DType::b8 && self.dtype() == DType::b8);
    LATHE_CHECK(!narrows_kind, "[add_] result type ", dtype_name(d),
                " cannot be stored in self of type ", dtype_name(self.dtype()));
  }
  TensorMeta m = result_meta(self.sizes(), self.dtype(), self.device());
  m.is_view = true;
  m.strides = self.strides();
  m.offset = self.storage_offset();
  return {m};
}

std::vector<Tensor> add_inplace_kernel(TensorList in, const Attrs& a,
                                       const std::vector<TensorMeta>&) {
  Tensor self = in[0];
  Tensor other = in[1].to(self.dtype()).expand(self.sizes());
  // Copy other first when it shares storage with self in a different layout.
  if (other.has_storage() && other.impl().storage == self.impl().storage) other = other.clone();
  double alpha = a.get_double("alpha");
  LATHE_DISPATCH_ALL(self.dtype(), "add_", [&] {
    using T = scalar_t;
    T al = static_cast<T>(alpha);
    if constexpr (std::is_same_v<T, bool>) {
      kernels::map2<T, T>(self, self, other, [al](T x, T y) { return x || (al && y); });
    } else {
      kernels::map2<T, T>(self, self, other, [al](T x, T y) { return static_cast<T>(x + al * y); });
    }
  });
  return {self};
}

std::vector<Tensor> mul_scalar_inplace_kernel(TensorList in, const Attrs& a,
                                              const std::vector<TensorMeta>&) {
  Tensor self = in[0];
  double v = a.get_double("other");
  LATHE_DISPATCH_ALL(self.dtype(), "mul_", [&] {
    using T = scalar_t;
    T s = static_cast<T>(v);
    if constexpr (std::is_same_v<T, bool>) {
      kernels::map1<T, T>(self, self, [s](T x) { return x && s; });
    } else {
      kernels::map1<T, T>(self, self, [s](T x) { return static_cast<T>(x * s); });
    }
  });
  return {self};
}

std::vector<TensorMeta> mul_scalar_rule(TensorList in, const Attrs&) {
  return {result_meta(in[0].sizes(), in[0].dtype(), in[0].device())};
}

// Writes into a fresh output the same values mul_scalar_ writes into self.
std::vector<Tensor> mul_scalar_kernel(TensorList in, const Attrs& a,
                                      const std::vector<TensorMeta>& m) {
  Tensor out = alloc_output(m[0].sizes, m[0].dtype, in);
  kernels::copy(out, in[0]);
  Tensor o = out;
  return mul_scalar_inplace_kernel({&o, 1}, a, m);
}

std::vector<Tensor> relu_inplace_kernel(TensorList in, const Attrs&,
                                        const std::vector<TensorMeta>&) {
  Tensor self = in[0];
  LATHE_DISPATCH_ALL(self.dtype(), "relu_", [&] {
    using T = scalar_t;
    // NaN stays NaN, as in PyTorch.
    kernels::map1<T, T>(self, self, [](T x) { return x > T(0) || x != x ? x : T(0); });
  });
  return {self};
}

}  // namespace

namespace detail {
// mul_scalar, where, and the in-place ops (add_, mul_scalar_, relu_).
static void register_scalar_where_and_in_place_ops(OpRegistry& r) {
  using T = AttrType;
  // The functional form of mul_scalar_: x * other in x's dtype.
  r.add(detail::define_op("mul_scalar", 1, mul_scalar_rule, mul_scalar_kernel,
                          OpCategory::pointwise, {detail::required("other", T::real)}));

  {
    OpDef where = detail::define_op("where", 3, where_rule, allocating(where_out_kernel),
                                    OpCategory::pointwise, {});
    r.add(std::move(where), where_out_kernel);
  }
  auto in_place = [&](const char* name, int inputs, EagerKernel kernel, const char* functional,
                      std::vector<AttrSpec> attrs) {
    OpDef op = detail::define_op(name, inputs, inplace_rule, std::move(kernel),
                                 OpCategory::in_place, std::move(attrs));
    op.mutated_inputs = {0};
    op.output_aliases = {0};
    op.functional_variant = functional;
    r.add(std::move(op));
  };
  in_place("add_", 2, add_inplace_kernel, "add", {detail::required("alpha", T::real)});
  in_place("mul_scalar_", 1, mul_scalar_inplace_kernel, "mul_scalar",
           {detail::required("other", T::real)});
  in_place("relu_", 1, relu_inplace_kernel, "relu", {});
}

// The binary arithmetic and comparison ops.
static void register_binary_ops(OpRegistry& r) {
  add_binary(
      r, "add", BinKind::arith, [](auto x, auto y, auto al) { return x + al * y; }, true);
  add_binary(
      r, "sub", BinKind::arith, [](auto x, auto y, auto al) { return x - al * y; }, true);
  add_binary(r, "mul", BinKind::arith, [](auto x, auto y, auto) { return x * y; });
  add_binary(r, "div", BinKind::divide, [](auto x, auto y, auto) { return x / y; });
  add_binary(r, "pow", BinKind::arith, [](auto x, auto y, auto) { return py_pow(x, y); });
  add_binary(r, "maximum", BinKind::arith, [](auto x, auto y, auto) { return nan_max(x, y); });
  add_binary(r, "minimum", BinKind::arith, [](auto x, auto y, auto) { return nan_min(x, y); });
  add_binary(r, "eq", BinKind::compare, [](auto x, auto y, auto) { return x == y; });
  add_binary(r, "ne", BinKind::compare, [](auto x, auto y, auto) { return x != y; });
  add_binary(r, "lt", BinKind::compare, [](auto x, auto y, auto) { return x < y; });
  add_binary(r, "le", BinKind::compare, [](auto x, auto y, auto) { return x <= y; });
  add_binary(r, "gt", BinKind::compare, [](auto x, auto y, auto) { return x > y; });
  add_binary(r, "ge", BinKind::compare, [](auto x, auto y, auto) { return x >= y; });
}

void register_elementwise_ops(OpRegistry& r) {
  register_binary_ops(r);

  using A = const Attrs&;
  const auto K = UnaryKind::keep;
  const auto F = UnaryKind::floating;
  add_unary(r, "neg", K, [](A) { return [](auto x) { return -x; }; });
  add_unary(r, "abs", K, [](A) { return [](auto x) { return x < 0 ? -x : x; }; });
  add_unary(r, "logical_not", K, [](A) { return [](auto x) { return x; }; });
  add_unary(r, "exp", F, [](A) { return [](auto x) { return std::exp(x); }; });
  add_unary(r, "log", F, [](A) { return [](auto x) { return std::log(x); }; });
  add_unary(r, "sqrt", F, [](A) { return [](auto x) { return std::sqrt(x); }; });
  add_unary(r, "rsqrt", F, [](A) { return [](auto x) { return decltype(x)(1) / std::sqrt(x); }; });
  add_unary(r, "tanh", F, [](A) { return [](auto x) { return std::tanh(x); }; });
  add_unary(r, "erf", F, [](A) { return [](auto x) { return std::erf(x); }; });
  add_unary(r, "sigmoid", F, [](A) {
    return [](auto x) { return decltype(x)(1) / (decltype(x)(1) + std::exp(-x)); };
  });
  add_unary(r, "silu", F,
            [](A) { return [](auto x) { return x / (decltype(x)(1) + std::exp(-x)); }; });
  using T = AttrType;
  add_unary(r, "relu", K, [](A) {  // NaN stays NaN, as in PyTorch
    return [](auto x) { return x > 0 || x != x ? x : decltype(x)(0); };
  });
  add_unary(
      r, "hardtanh", K,
      [](A a) {
        const double lo = a.get_double("min_val"), hi = a.get_double("max_val");
        return [lo, hi](auto x) {
          using T = decltype(x);
          const T l = static_cast<T>(lo), h = static_cast<T>(hi);
          return x < l ? l : (x > h ? h : x);
        };
      },
      {detail::required("min_val", T::real), detail::required("max_val", T::real)},
      [](A a) {
        const double lo = a.get_double("min_val"), hi = a.get_double("max_val");
        LATHE_CHECK(lo <= hi, "[hardtanh] min_val ", lo, " is greater than max_val ", hi);
      });
  add_unary(r, "hardswish", F, [](A) {
    return [](auto x) {
      using T = decltype(x);
      T r6 = std::min(std::max(x + T(3), T(0)), T(6));
      return x * r6 / T(6);
    };
  });
  add_unary(r, "hardsigmoid", F, [](A) {
    return [](auto x) {
      using T = decltype(x);
      return std::min(std::max(x + T(3), T(0)), T(6)) / T(6);
    };
  });
  add_unary(
      r, "gelu", F,
      [](A a) {
        const bool tanh_form = a.get_string("approximate") == "tanh";
        return [tanh_form](auto x) {
          using T = decltype(x);
          if (tanh_form) {
            const T k = static_cast<T>(0.7978845608028654);  // sqrt(2/pi)
            return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
          }
          return T(0.5) * x * (T(1) + std::erf(x * static_cast<T>(0.7071067811865476)));
        };
      },
      {detail::required("approximate", T::string)},
      [](A a) {
        const std::string& approximate = a.get_string("approximate");
        LATHE_CHECK(approximate == "none" || approximate == "tanh",
                    "[gelu] approximate must be 'none' or 'tanh', got '", approximate, "'");
      });
  add_unary(
      r, "clamp", K,
      [](A a) {
        const bool has_lo = a.has("min"), has_hi = a.has("max");
        const double lo = has_lo ? a.get_double("min") : 0.0,
                     hi = has_hi ? a.get_double("max") : 0.0;
        return [=](auto x) {
          using T = decltype(x);
          if (has_lo && static_cast<double>(x) < lo) x = static_cast<T>(lo);
          if (has_hi && static_cast<double>(x) > hi) x = static_cast<T>(hi);
          return x;
        };
      },
      {detail::optional("min", T::real), detail::optional("max", T::real)},
      [](A a) {
        LATHE_CHECK(a.has("min") || a.has("max"),
                    "[clamp] at least one of min and max must be given");
      });
  register_scalar_where_and_in_place_ops(r);
}
}  // namespace detail

// ---- free functions ----
namespace {
Tensor bin(const OpDef& op, const Tensor& a, const Tensor& b, Attrs attrs = {}) {
  Tensor in[2] = {a, b};
  return dispatch1(op, in, attrs);
}
// A 0-d tensor holding a Python-style scalar in the dtype it promotes to with `t`.
Tensor scalar_like(const Tensor& t, double v) {
  bool fractional = std::floor(v) != v || !std::isfinite(v);
  DType d = promote_with_scalar(t.dtype(), fractional || is_floating(t.dtype()));
  if (t.dtype() == DType::b8 && !fractional) d = DType::i64;
  return full({}, v, d);
}
// Scalar operand: compute in the tensor's (promoted) dtype.
Tensor bin_scalar(const OpDef& op, const Tensor& a, double v, bool swap = false) {
  Tensor s = scalar_like(a, v);
  DType d = promote_with_scalar(a.dtype(), std::floor(v) != v || !std::isfinite(v));
  Tensor x = a.to(d);
  s = s.to(d);
  return swap ? bin(op, s, x) : bin(op, x, s);
}
Tensor un(const OpDef& op, const Tensor& x, Attrs attrs = {}) {
  return dispatch1(op, {&x, 1}, attrs);
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  return bin(LATHE_OP("add"), a, b, Attrs{{"alpha", alpha}});
}
Tensor sub(const Tensor& a, const Tensor& b, double alpha) {
  return bin(LATHE_OP("sub"), a, b, Attrs{{"alpha", alpha}});
}
Tensor mul(const Tensor& a, const Tensor& b) { return bin(LATHE_OP("mul"), a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return bin(LATHE_OP("div"), a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return bin(LATHE_OP("pow"), a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return bin(LATHE_OP("maximum"), a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return bin(LATHE_OP("minimum"), a, b); }
Tensor add(const Tensor& a, double b) { return bin_scalar(LATHE_OP("add"), a, b); }
Tensor sub(const Tensor& a, double b) { return bin_scalar(LATHE_OP("sub"), a, b); }
Tensor rsub(const Tensor& a, double b) { return bin_scalar(LATHE_OP("sub"), a, b, true); }
Tensor mul(const Tensor& a, double b) { return bin_scalar(LATHE_OP("mul"), a, b); }
Tensor div(const Tensor& a, double b) { return bin_scalar(LATHE_OP("div"), a, b); }
Tensor pow(const Tensor& a, double e) { return bin_scalar(LATHE_OP("pow"), a, e); }

Tensor eq(const Tensor& a, const Tensor& b) { return bin(LATHE_OP("eq"), a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return bin(LATHE_OP("ne"), a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return bin(LATHE_OP("lt"), a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return bin(LATHE_OP("le"), a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return bin(LATHE_OP("gt"), a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return bin(LATHE_OP("ge"), a, b); }
Tensor eq(const Tensor& a, double b) { return bin_scalar(LATHE_OP("eq"), a, b); }
Tensor ne(const Tensor& a, double b) { return bin_scalar(LATHE_OP("ne"), a, b); }
Tensor lt(const Tensor& a, double b) { return bin_scalar(LATHE_OP("lt"), a, b); }
Tensor le(const Tensor& a, double b) { return bin_scalar(LATHE_OP("le"), a, b); }
Tensor gt(const Tensor& a, double b) { return bin_scalar(LATHE_OP("gt"), a, b); }
Tensor ge(const Tensor& a, double b) { return bin_scalar(LATHE_OP("ge"), a, b); }
Tensor logical_not(const Tensor& a) { return un(LATHE_OP("logical_not"), a); }

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) {
  Tensor in[3] = {c, a, b};
  return dispatch1(LATHE_OP("where"), in, Attrs{});
}
Tensor where(const Tensor& c, const Tensor& a, double b) {
  DType d = promote_with_scalar(a.dtype(), std::floor(b) != b || !std::isfinite(b));
  return where(c, a.to(d), full({}, b, d));
}

Tensor neg(const Tensor& x) { return un(LATHE_OP("neg"), x); }
Tensor abs(const Tensor& x) { return un(LATHE_OP("abs"), x); }
Tensor exp(const Tensor& x) { return un(LATHE_OP("exp"), x); }
Tensor log(const Tensor& x) { return un(LATHE_OP("log"), x); }
Tensor sqrt(const Tensor& x) { return un(LATHE_OP("sqrt"), x); }
Tensor rsqrt(const Tensor& x) { return un(LATHE_OP("rsqrt"), x); }
Tensor tanh(const Tensor& x) { return un(LATHE_OP("tanh"), x); }
Tensor sigmoid(const Tensor& x) { return un(LATHE_OP("sigmoid"), x); }
Tensor erf(const Tensor& x) { return un(LATHE_OP("erf"), x); }
Tensor relu(const Tensor& x) { return un(LATHE_OP("relu"), x); }
Tensor relu6(const Tensor& x) { return hardtanh(x, 0.0, 6.0); }
Tensor hardtanh(const Tensor& x, double lo, double hi) {
  return un(LATHE_OP("hardtanh"), x, Attrs{{"min_val", lo}, {"max_val", hi}});
}
Tensor hardswish(const Tensor& x) { return un(LATHE_OP("hardswish"), x); }
Tensor hardsigmoid(const Tensor& x) { return un(LATHE_OP("hardsigmoid"), x); }
Tensor gelu(const Tensor& x, const std::string& approximate) {
  return un(LATHE_OP("gelu"), x, Attrs{{"approximate", approximate}});
}
Tensor silu(const Tensor& x) { return un(LATHE_OP("silu"), x); }
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  Attrs a;
  if (lo) a.set("min", *lo);
  if (hi) a.set("max", *hi);
  return un(LATHE_OP("clamp"), x, a);
}

Tensor& add_(Tensor& self, const Tensor& other, double alpha) {
  Tensor in[2] = {self, other};
  dispatch(LATHE_OP("add_"), in, Attrs{{"alpha", alpha}});
  return self;
}
Tensor& mul_(Tensor& self, double v) {
  dispatch(LATHE_OP("mul_scalar_"), {&self, 1}, Attrs{{"other", v}});
  return self;
}
Tensor& relu_(Tensor& self) {
  dispatch(LATHE_OP("relu_"), {&self, 1}, Attrs{});
  return self;
}

}  // namespace lathe
