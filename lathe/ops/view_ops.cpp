// View ops: results share the input's storage; the shape rule computes sizes, strides and offset.
#include <algorithm>
#include <numeric>
#include <string_view>

#include "lathe/kernels/elementwise.h"
#include "lathe/ops/ops.h"
#include "lathe/ops/register.h"

namespace lathe {
namespace {

int64_t wrap(int64_t d, int64_t ndim, const char* op) {
  int64_t r = d < 0 ? d + ndim : d;
  LATHE_CHECK(r >= 0 && r < ndim, "[", op, "] dim ", d, " is out of range for a tensor of ", ndim,
              " dims");
  return r;
}

TensorMeta view_meta(const Tensor& x, Shape sizes, Shape strides, int64_t offset) {
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  m.offset = offset;
  m.dtype = x.dtype();
  m.device = x.device();
  m.is_view = true;
  return m;
}

std::vector<Tensor> view_kernel(TensorList in, const Attrs&, const std::vector<TensorMeta>& m) {
  return {make_view(in[0], m[0].sizes, m[0].strides, m[0].offset)};
}

// Replaces a single -1 with the size that keeps numel; checks the total. Works on symbolic sizes
// (the divisibility and equality checks then guard).
Shape infer_size(const Shape& req, SymInt numel, const char* op, const Tensor& x) {
  Shape out = req;
  int infer = -1;
  SymInt known = 1;
  for (size_t i = 0; i < req.size(); ++i) {
    if (req[i] == -1) {
      LATHE_CHECK(infer < 0, "[", op, "] only one dimension can be -1, got shape ", req);
      infer = static_cast<int>(i);
    } else {
      LATHE_CHECK(req[i] >= 0, "[", op, "] invalid size ", req[i], " in shape ", req);
      known = known * req[i];
    }
  }
  if (infer >= 0) {
    LATHE_CHECK(known != 0 && mod(numel, known) == 0, "[", op, "] shape ", req,
                " is invalid for input ", x.shape_string(), " of ", numel, " elements");
    out[infer] = floor_div(numel, known);
  } else {
    LATHE_CHECK(known == numel, "[", op, "] shape ", req, " is invalid for input ",
                x.shape_string(), " of ", numel, " elements");
  }
  return out;
}

bool is_concrete(const Shape& s) {
  for (const SymInt& v : s)
    if (v.is_symbolic()) return false;
  return true;
}

// Concrete values of a shape, specializing symbolic ones (with a guard naming `why`).
std::vector<int64_t> specialize(const Shape& s, const char* why) {
  std::vector<int64_t> r(s.size());
  for (size_t i = 0; i < s.size(); ++i)
    r[i] = s[i].is_symbolic() ? s[i].guard_int(why) : *s[i].maybe_int();
  return r;
}

int64_t hint_of(int64_t v) { return v; }
int64_t hint_of(const SymInt& v) { return v.hint(); }
Shape as_shape(const std::vector<int64_t>& v) { return to_shape(v); }
const Shape& as_shape(const Shape& s) { return s; }

// Strides for viewing (sizes, strides) as new_sizes without a copy, if possible (the algorithm of
// PyTorch's computeStride: match chunks of contiguous dims). Over concrete ints, or over symbolic
// sizes with every comparison decided at the trace-time values (SymInt::hint, no guard; the strides
// are expressions of the sizes), which reshape uses: its kernel decides view-or-copy again from the
// real strides on every run.
template <class Ints>
std::optional<Shape> view_strides(const Ints& old_sz, const Ints& old_st, const Ints& new_sz) {
  using Int = typename Ints::value_type;
  Shape new_st(new_sz.size());
  Int numel = 1;
  for (const Int& s : old_sz) numel = numel * s;
  if (hint_of(numel) == 0) return contiguous_strides(as_shape(new_sz));
  if (old_sz.empty()) {
    for (auto& s : new_st) s = 1;
    return new_st;
  }
  int64_t view_d = static_cast<int64_t>(new_sz.size()) - 1;
  Int chunk_base_stride = old_st.back();
  Int tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sz.size()) - 1; d >= 0; --d) {
    tensor_numel = tensor_numel * old_sz[d];
    if (d == 0 || (hint_of(old_sz[d - 1]) != 1 &&
                   hint_of(old_st[d - 1]) != hint_of(tensor_numel * chunk_base_stride))) {
      while (view_d >= 0 &&
             (hint_of(view_numel) < hint_of(tensor_numel) || hint_of(new_sz[view_d]) == 1)) {
        new_st[view_d] = view_numel * chunk_base_stride;
        view_numel = view_numel * new_sz[view_d];
        --view_d;
      }
      if (hint_of(view_numel) != hint_of(tensor_numel)) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_st[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_st;
}

// Strides of x viewed as `sizes`, if possible without a copy. Symbolic shapes: a contiguous
// input views with row-major strides; anything else is specialized to concrete sizes (an
// explicit view must be one on every call).
std::optional<Shape> view_strides_of(const Tensor& x, const Shape& sizes) {
  if (is_concrete(x.sizes()) && is_concrete(x.strides()) && is_concrete(sizes))
    return view_strides(x.shape(), x.int_strides(), to_ints(sizes));
  if (x.is_contiguous()) return contiguous_strides(sizes);
  auto st = view_strides(specialize(x.sizes(), "[view] non-contiguous input"),
                         specialize(x.strides(), "[view] non-contiguous input"),
                         specialize(sizes, "[view] non-contiguous input"));
  return st;
}

// reshape: a view when x's real strides allow one, else a row-major copy. The shape rule decides
// from the strides it sees (real ones in eager and when a graph runs, trace-time ones while
// tracing); the kernel follows the metadata, so a graph records `reshape` and each run decides
// anew (as MLX's reshape does).
std::vector<TensorMeta> reshape_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  Shape sizes = infer_size(a.get_shape("size"), shape_numel(x.sizes()), "reshape", x);
  std::optional<Shape> st;
  if (is_concrete(x.sizes()) && is_concrete(x.strides()) && is_concrete(sizes))
    st = view_strides(x.shape(), x.int_strides(), to_ints(sizes));
  else
    st = view_strides(x.sizes(), x.strides(), sizes);
  if (st) return {view_meta(x, sizes, *st, x.storage_offset())};
  TensorMeta m;
  m.strides = contiguous_strides(sizes);
  m.sizes = std::move(sizes);
  m.dtype = x.dtype();
  m.device = x.device();
  return {m};
}

std::vector<Tensor> reshape_kernel(TensorList in, const Attrs&, const std::vector<TensorMeta>& m) {
  const Tensor& x = in[0];
  if (m[0].is_view) return {make_view(x, m[0].sizes, m[0].strides, m[0].offset)};
  Tensor out = empty(m[0].sizes, m[0].dtype);
  // The copy in row-major order: x's elements into `out` seen with x's sizes.
  kernels::copy(make_view(out, x.sizes(), contiguous_strides(x.sizes()), 0), x);
  return {out};
}

std::vector<TensorMeta> view_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  Shape sizes = infer_size(a.get_shape("size"), shape_numel(x.sizes()), "view", x);
  auto st = view_strides_of(x, sizes);
  LATHE_CHECK(st.has_value(), "[view] cannot view ", x.shape_string(), " with strides ",
              x.strides(), " as shape ", sizes,
              " without a copy (the dims span non-contiguous memory); use reshape()");
  return {view_meta(x, sizes, *st, x.storage_offset())};
}

std::vector<TensorMeta> permute_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  auto dims = a.get_ints("dims");
  int64_t n = x.dim();
  LATHE_CHECK(static_cast<int64_t>(dims.size()) == n, "[permute] got ", dims.size(),
              " dims for a tensor of ", n, " dims: ", dims);
  std::vector<bool> seen(n, false);
  Shape sz(n), st(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap(dims[i], n, "permute");
    LATHE_CHECK(!seen[d], "[permute] dim ", dims[i], " repeats in ", dims);
    seen[d] = true;
    sz[i] = x.sizes()[d];
    st[i] = x.strides()[d];
  }
  return {view_meta(x, sz, st, x.storage_offset())};
}

// A slice bound: an int, or a one-element shape holding a symbolic bound (Tensor::narrow).
SymInt slice_bound(const Attrs& a, const char* name) {
  const auto& items = a.items();
  for (const auto& [n, v] : items) {
    if (std::string_view(n) != name) continue;
    if (const Shape* s = std::get_if<Shape>(&v)) {
      LATHE_CHECK(s->size() == 1, "[slice] bound '", name, "' must be one value, got ", *s);
      return (*s)[0];
    }
  }
  return a.get_int(name);
}

// Storage offsets are concrete. A symbolic one (a view counted from the end of a symbolic dim,
// such as select(0, -1)) takes its trace-time value without a guard: offsets are not part of a
// traced value's type, and the executable recomputes every view's offset from the real tensors,
// so specializing the size here would only pin it for nothing.
int64_t concrete_offset(SymInt off) { return off.is_symbolic() ? off.hint() : *off.maybe_int(); }

// A slice bound at or beyond this is "to the end" (INT64_MAX is the usual spelling); comparing it
// with a symbolic size would overflow the relation's arithmetic.
constexpr int64_t kSliceToEnd = int64_t{1} << 62;

std::vector<TensorMeta> slice_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  LATHE_CHECK(x.dim() > 0, "[slice] cannot slice a 0-d tensor");
  int64_t d = wrap(a.get_int("dim"), x.dim(), "slice");
  SymInt n = x.size(d);
  SymInt start = slice_bound(a, "start"), end = slice_bound(a, "end");
  int64_t step = a.get_int("step");
  LATHE_CHECK(step > 0, "[slice] step must be positive, got ", step);
  // Python clamping (decided with guards when symbolic).
  if (end.maybe_int() && *end.maybe_int() >= kSliceToEnd) end = n;
  if (start.maybe_int() && *start.maybe_int() >= kSliceToEnd) start = n;
  if (start < 0) start = start + n;
  if (end < 0) end = end + n;
  if (start < 0) start = 0;
  if (start > n) start = n;
  if (end < start) end = start;
  if (end > n) end = n;
  Shape sz = x.sizes(), st = x.strides();
  sz[d] = floor_div(end - start + step - 1, step);
  st[d] = x.strides()[d] * step;
  int64_t off = concrete_offset(x.storage_offset() + start * x.stride(d));
  return {view_meta(x, sz, st, off)};
}

std::vector<TensorMeta> select_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  LATHE_CHECK(x.dim() > 0, "[select] cannot select from a 0-d tensor");
  int64_t d = wrap(a.get_int("dim"), x.dim(), "select");
  SymInt n = x.size(d);
  int64_t idx = a.get_int("index");
  LATHE_CHECK(SymInt(idx) >= -n && SymInt(idx) < n, "[select] index ", idx,
              " is out of range for dim ", d, " of size ", n, " in ", x.shape_string());
  SymInt i = idx < 0 ? SymInt(idx) + n : SymInt(idx);
  Shape sz = x.sizes(), st = x.strides();
  int64_t off = concrete_offset(x.storage_offset() + i * st[d]);
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return {view_meta(x, sz, st, off)};
}

std::vector<TensorMeta> expand_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  const Shape& req = a.get_shape("size");
  int64_t n = static_cast<int64_t>(req.size());
  LATHE_CHECK(n >= x.dim(), "[expand] cannot expand ", x.shape_string(), " to fewer dims ", req);
  Shape sz(n), st(n);
  for (int64_t i = n - 1; i >= 0; --i) {
    int64_t xi = i - (n - x.dim());
    if (xi >= 0) {
      SymInt have = x.sizes()[xi];
      SymInt want = req[i] == -1 ? have : req[i];
      if (have == want) {
        sz[i] = have;
        st[i] = x.strides()[xi];
      } else {
        LATHE_CHECK(have == 1, "[expand] size ", have, " of dim ", xi, " of ", x.shape_string(),
                    " cannot expand to ", want, " (target ", req, ")");
        sz[i] = want;
        st[i] = 0;
      }
    } else {
      LATHE_CHECK(req[i] >= 0, "[expand] new leading dim cannot be -1 in ", req);
      sz[i] = req[i];
      st[i] = 0;
    }
  }
  return {view_meta(x, sz, st, x.storage_offset())};
}

std::vector<TensorMeta> squeeze_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  Shape sz, st;
  auto dims = a.get_ints("dims");
  std::vector<bool> drop(x.dim(), dims.empty());
  for (int64_t d : dims) drop[wrap(d, x.dim(), "squeeze")] = true;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (drop[i] && x.sizes()[i] == 1) continue;
    sz.push_back(x.sizes()[i]);
    st.push_back(x.strides()[i]);
  }
  return {view_meta(x, sz, st, x.storage_offset())};
}

std::vector<TensorMeta> unsqueeze_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  int64_t d = wrap(a.get_int("dim"), x.dim() + 1, "unsqueeze");
  Shape sz = x.sizes(), st = x.strides();
  SymInt s = d < x.dim() ? st[d] * sz[d] : SymInt(1);
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, s);
  return {view_meta(x, sz, st, x.storage_offset())};
}

std::vector<TensorMeta> as_strided_rule(TensorList in, const Attrs& a) {
  const Tensor& x = in[0];
  const Shape& sz = a.get_shape("size");
  const Shape& st = a.get_shape("stride");
  int64_t off = a.get_int("offset");
  LATHE_CHECK(sz.size() == st.size(), "[as_strided] ", sz.size(), " sizes but ", st.size(),
              " strides");
  if (x.has_storage()) {
    int64_t last = off;
    bool empty = false;
    for (size_t i = 0; i < sz.size(); ++i) {
      LATHE_CHECK(sz[i] >= 0 && st[i] >= 0, "[as_strided] negative size or stride");
      if (sz[i] == 0) empty = true;
      last += (sz[i].expect_int() - 1) * st[i].expect_int();
    }
    int64_t cap = static_cast<int64_t>(x.impl().storage->nbytes() / itemsize(x.dtype()));
    LATHE_CHECK(empty || (off >= 0 && last < cap), "[as_strided] view ", sz, " strides ", st,
                " offset ", off, " reaches past the storage of ", cap, " elements");
  }
  return {view_meta(x, sz, st, off)};
}

// detach: the same view of the same data. Only a trace records it (Tensor::detach under a
// dispatch mode), under a NoGradGuard: AOT autograd then sends no gradient through it.
std::vector<TensorMeta> detach_rule(TensorList in, const Attrs&) {
  const Tensor& x = in[0];
  return {view_meta(x, x.sizes(), x.strides(), x.storage_offset())};
}

OpDef view_op(const char* name, ShapeRule rule, std::vector<AttrSpec> attrs) {
  OpDef op =
      detail::define_op(name, 1, std::move(rule), view_kernel, OpCategory::view, std::move(attrs));
  op.output_aliases = {0};
  return op;
}

}  // namespace

namespace detail {
void register_view_ops(OpRegistry& r) {
  using T = AttrType;
  r.add(view_op("view", view_rule, {required("size", T::int_list)}));
  r.add(view_op("permute", permute_rule, {required("dims", T::int_list)}));
  r.add(view_op("slice", slice_rule,
                {required("dim", T::integer), required("start", T::sym_int),
                 required("end", T::sym_int), required("step", T::integer)}));
  r.add(
      view_op("select", select_rule, {required("dim", T::integer), required("index", T::integer)}));
  r.add(view_op("expand", expand_rule, {required("size", T::int_list)}));
  r.add(view_op("squeeze", squeeze_rule, {required("dims", T::int_list)}));
  r.add(view_op("unsqueeze", unsqueeze_rule, {required("dim", T::integer)}));
  r.add(view_op("as_strided", as_strided_rule,
                {required("size", T::int_list), required("stride", T::int_list),
                 required("offset", T::integer)}));
  r.add(view_op("detach", detach_rule, {}));
  // reshape may alias its input: a view when the real strides allow one, else a copy. Alias
  // analysis treats it as a view (conservative for "may alias").
  OpDef reshape = detail::define_op("reshape", 1, reshape_rule, reshape_kernel, OpCategory::view,
                                    {required("size", T::int_list)});
  reshape.output_aliases = {0};
  r.add(std::move(reshape));
}
}  // namespace detail

// ---- the view ops behind Tensor's view members (core/tensor_methods.h) ----

namespace {

Tensor view_of(const Tensor& x, const Shape& sizes) {
  return dispatch1(LATHE_OP("view"), {&x, 1}, Attrs{{"size", sizes}});
}

Tensor reshape_of(const Tensor& x, const Shape& sizes) {
  return dispatch1(LATHE_OP("reshape"), {&x, 1}, Attrs{{"size", sizes}});
}

Tensor permute_of(const Tensor& x, const std::vector<int64_t>& dims) {
  return dispatch1(LATHE_OP("permute"), {&x, 1}, Attrs{{"dims", to_shape(dims)}});
}

AttrValue sym_attr(const SymInt& v) {
  return v.is_symbolic() ? AttrValue(Shape{v}) : AttrValue(*v.maybe_int());
}

Tensor slice_of(const Tensor& x, int64_t d, SymInt start, SymInt end, int64_t step) {
  return dispatch1(
      LATHE_OP("slice"), {&x, 1},
      Attrs{{"dim", d}, {"start", sym_attr(start)}, {"end", sym_attr(end)}, {"step", step}});
}

Tensor select_of(const Tensor& x, int64_t d, int64_t index) {
  return dispatch1(LATHE_OP("select"), {&x, 1}, Attrs{{"dim", d}, {"index", index}});
}

Tensor expand_of(const Tensor& x, const Shape& sizes) {
  return dispatch1(LATHE_OP("expand"), {&x, 1}, Attrs{{"size", sizes}});
}

Tensor squeeze_of(const Tensor& x, const Shape& dims) {
  return dispatch1(LATHE_OP("squeeze"), {&x, 1}, Attrs{{"dims", dims}});
}

Tensor unsqueeze_of(const Tensor& x, int64_t d) {
  return dispatch1(LATHE_OP("unsqueeze"), {&x, 1}, Attrs{{"dim", d}});
}

Tensor as_strided_of(const Tensor& x, const Shape& sizes, const Shape& strides, int64_t offset) {
  return dispatch1(LATHE_OP("as_strided"), {&x, 1},
                   Attrs{{"size", sizes}, {"stride", strides}, {"offset", offset}});
}

}  // namespace

void detail::set_view_functions(TensorOpFunctions& f) {
  f.view = view_of;
  f.reshape = reshape_of;
  f.permute = permute_of;
  f.slice = slice_of;
  f.select = select_of;
  f.expand = expand_of;
  f.squeeze = squeeze_of;
  f.unsqueeze = unsqueeze_of;
  f.as_strided = as_strided_of;
}

namespace {
// split and chunk of a symbolic dim: pieces of `piece` (a SymInt), the last one what is left.
// The number of pieces must be concrete, so it is specialized with a guard on
// CeilDiv(n, piece) == count: every size giving the same count shares the trace.
std::vector<Tensor> split_symbolic(const Tensor& x, SymInt piece, int64_t d, const char* op) {
  SymInt n = x.size(d);
  const std::string why =
      detail::str("[", op, "] the number of pieces of dim ", d, " depends on its size");
  if (std::optional<int64_t> k = piece.maybe_int()) {
    // The same count as two bounds on n: they narrow its range, which then proves every piece's
    // bounds without further guards.
    const int64_t count = (n.hint() + *k - 1) / *k;
    LATHE_CHECK((n > (count - 1) * *k).guard(why) && (n <= count * *k).guard(why), "[", op,
                "] internal: the traced size left its range");
  }
  const int64_t count = ceil_div(n, piece).guard_int(why);
  std::vector<Tensor> out;
  if (count <= 0) return {x.narrow(d, 0, 0)};
  for (int64_t i = 0; i + 1 < count; ++i) out.push_back(x.narrow(d, piece * i, piece));
  SymInt start = piece * (count - 1);
  out.push_back(x.narrow(d, start, n - start));
  return out;
}
}  // namespace

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  int64_t d = wrap(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    LATHE_CHECK(s >= 0, "[split] negative split size in ", sizes);
    total += s;
  }
  // Explicit sizes fix a symbolic dim to their sum.
  LATHE_CHECK(
      (x.size(d) == total)
          .guard(detail::str("[split] the split sizes ", sizes, " fix the size of dim ", d)),
      "[split] sizes ", sizes, " sum to ", total, " but dim ", d, " of ", x.shape_string(), " has ",
      x.size(d));
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(x.slice(d, start, start + s));
    start += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  int64_t d = wrap(dim, x.dim(), "split");
  LATHE_CHECK(split_size > 0, "[split] split_size must be positive, got ", split_size);
  if (x.size(d).is_symbolic()) return split_symbolic(x, split_size, d, "split");
  int64_t n = x.size(d).expect_int();
  std::vector<int64_t> sizes;
  for (int64_t s = 0; s < n; s += split_size) sizes.push_back(std::min(split_size, n - s));
  if (sizes.empty()) sizes.push_back(0);
  return split(x, sizes, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  LATHE_CHECK(chunks > 0, "[chunk] chunks must be positive, got ", chunks);
  int64_t d = wrap(dim, x.dim(), "chunk");
  if (SymInt n = x.size(d); n.is_symbolic()) {
    // A size that divides gives `chunks` equal pieces of one expression (n / chunks), so the
    // pieces broadcast against each other without further guards.
    if ((mod(n, chunks) == 0).guard("[chunk] the size divides into equal chunks")) {
      SymInt piece = floor_div(n, chunks);
      std::vector<Tensor> out;
      for (int64_t i = 0; i < chunks; ++i) out.push_back(x.narrow(d, piece * i, piece));
      return out;
    }
    return split_symbolic(x, ceil_div(n, chunks), d, "chunk");
  }
  int64_t n = x.size(d).expect_int();
  return split(x, std::max<int64_t>(1, (n + chunks - 1) / chunks), d);
}

}  // namespace lathe
