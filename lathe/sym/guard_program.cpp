#include "lathe/sym/guard_program.h"

#include <algorithm>
#include <sstream>

#include "lathe/sym/int_math.h"
#include "lathe/sym/sym_error.h"

namespace lathe::sym {
namespace {

bool holds(ExprKind rel, int64_t l, int64_t r) {
  switch (rel) {
    case ExprKind::kEq:
      return l == r;
    case ExprKind::kNe:
      return l != r;
    case ExprKind::kLt:
      return l < r;
    case ExprKind::kLe:
      return l <= r;
    case ExprKind::kGt:
      return l > r;
    default:
      return l >= r;
  }
}

// 4 < s  <=>  s > 4.
ExprKind flip(ExprKind rel) {
  switch (rel) {
    case ExprKind::kLt:
      return ExprKind::kGt;
    case ExprKind::kLe:
      return ExprKind::kGe;
    case ExprKind::kGt:
      return ExprKind::kLt;
    case ExprKind::kGe:
      return ExprKind::kLe;
    default:
      return rel;
  }
}

}  // namespace

template <typename Ref>
static inline bool read_ref(const Ref& r, std::span<const ArgView> in, int64_t* out) noexcept {
  if (static_cast<size_t>(r.arg) >= in.size()) return false;
  const ArgView& a = in[r.arg];
  switch (r.kind) {
    case Source::Kind::kSize:
      if (r.dim >= a.rank || a.sizes == nullptr) return false;
      *out = a.sizes[r.dim];
      return true;
    case Source::Kind::kStride:
      if (r.dim >= a.rank || a.strides == nullptr) return false;
      *out = a.strides[r.dim];
      return true;
    case Source::Kind::kScalar:
      if (a.rank != -1) return false;
      *out = a.scalar;
      return true;
  }
  return false;
}

GuardCheck GuardProgram::check(std::span<const ArgView> inputs) const noexcept {
  const Code* code = code_.data();
  const size_t n = code_.size();
  for (size_t i = 0; i < n; ++i) {
    const Code& c = code[i];
    int64_t x = 0, y = 0;
    bool ok = false;
    switch (c.op) {
      case Op::kBind:
        ok = read_ref(c.a, inputs, &x);
        break;
      case Op::kEqSources:
        ok = read_ref(c.a, inputs, &x) && read_ref(c.b, inputs, &y) && x == y;
        break;
      case Op::kEqConst:
        ok = read_ref(c.a, inputs, &x) && x == c.lo;
        break;
      case Op::kRange:
        ok = read_ref(c.a, inputs, &x) && c.lo <= x && x <= c.hi;
        break;
      case Op::kCmpConst:
        ok = read_ref(c.a, inputs, &x) && holds(c.rel, x, c.lo);
        break;
      case Op::kModEqConst:
        ok = read_ref(c.a, inputs, &x) && detail::try_mod(x, c.lo, &y) && y == c.hi;
        break;
      case Op::kExpr:
        ok = eval(c.lhs, inputs, &x) && eval(c.rhs, inputs, &y) && holds(c.rel, x, y);
        break;
    }
    if (!ok) [[unlikely]]
      return GuardCheck{static_cast<int32_t>(i)};
  }
  return GuardCheck{};
}

bool GuardProgram::eval(int32_t i, std::span<const ArgView> in, int64_t* out) const noexcept {
  const Node& n = nodes_[i];
  if (n.op == NodeOp::kConst) {
    *out = n.value;
    return true;
  }
  if (n.op == NodeOp::kSource) return read_ref(n.src, in, out);
  int64_t a, b;
  if (!eval(n.a, in, &a) || !eval(n.b, in, &b)) return false;
  switch (n.op) {
    case NodeOp::kAdd:
      return detail::try_add(a, b, out);
    case NodeOp::kMul:
      return detail::try_mul(a, b, out);
    case NodeOp::kFloorDiv:
      return detail::try_floordiv(a, b, out);
    case NodeOp::kCeilDiv:
      return detail::try_ceildiv(a, b, out);
    case NodeOp::kMod:
      return detail::try_mod(a, b, out);
    case NodeOp::kMin:
      *out = std::min(a, b);
      return true;
    case NodeOp::kMax:
      *out = std::max(a, b);
      return true;
    default:
      return false;
  }
}

int32_t GuardProgram::push(Node n) {
  nodes_.push_back(n);
  return static_cast<int32_t>(nodes_.size()) - 1;
}

void GuardProgram::note_read(const Source& s) {
  if (std::find(pending_reads_.begin(), pending_reads_.end(), s) == pending_reads_.end())
    pending_reads_.push_back(s);
}

int32_t GuardProgram::compile(const Expr* e, const SourceOf& source_of) {
  auto binary = [&](NodeOp op, int32_t a, int32_t b) {
    Node n = make_node(op);
    n.a = a;
    n.b = b;
    return push(n);
  };
  auto constant = [&](int64_t v) {
    Node n = make_node(NodeOp::kConst);
    n.value = v;
    return push(n);
  };
  switch (e->kind()) {
    case ExprKind::kInt:
      return constant(e->value());
    case ExprKind::kSymbol: {
      Source s = source_of(e);
      note_read(s);
      Node n = make_node(NodeOp::kSource);
      n.src = ref(s);
      return push(n);
    }
    case ExprKind::kAdd: {
      int32_t acc = e->value() != 0 ? constant(e->value()) : -1;
      for (size_t i = 0; i < e->args().size(); ++i) {
        int32_t t = compile(e->arg(i), source_of);
        if (e->coeffs()[i] != 1) t = binary(NodeOp::kMul, constant(e->coeffs()[i]), t);
        acc = acc < 0 ? t : binary(NodeOp::kAdd, acc, t);
      }
      return acc;
    }
    case ExprKind::kMul: {
      int32_t acc = -1;
      for (size_t i = 0; i < e->args().size(); ++i) {
        int32_t f = compile(e->arg(i), source_of);
        for (int64_t k = 0; k < e->coeffs()[i]; ++k)
          acc = acc < 0 ? f : binary(NodeOp::kMul, acc, f);
      }
      return acc;
    }
    case ExprKind::kFloorDiv:
    case ExprKind::kCeilDiv:
    case ExprKind::kMod: {
      NodeOp op = e->kind() == ExprKind::kFloorDiv  ? NodeOp::kFloorDiv
                  : e->kind() == ExprKind::kCeilDiv ? NodeOp::kCeilDiv
                                                    : NodeOp::kMod;
      int32_t a = compile(e->arg(0), source_of);
      return binary(op, a, compile(e->arg(1), source_of));
    }
    case ExprKind::kMin:
    case ExprKind::kMax: {
      int32_t acc = compile(e->arg(0), source_of);
      for (size_t i = 1; i < e->args().size(); ++i) {
        acc = binary(e->kind() == ExprKind::kMin ? NodeOp::kMin : NodeOp::kMax, acc,
                     compile(e->arg(i), source_of));
      }
      return acc;
    }
    default:
      throw SymError("[GuardProgram] cannot compile the condition " + sym::to_string(e) +
                     " as an integer expression");
  }
}

void GuardProgram::add(Code c, std::string text, std::string reason, std::string origin) {
  code_.push_back(c);
  info_.push_back({std::move(text), std::move(reason), std::move(origin)});
  reads_.push_back(std::move(pending_reads_));
  pending_reads_.clear();
}

void GuardProgram::add_bind(const std::string& symbol, const Source& source, std::string reason) {
  note_read(source);
  add(make_code(Op::kBind, ExprKind::kEq, ref(source)), symbol + " = " + source.to_string(),
      std::move(reason));
}

void GuardProgram::add_equal_sources(const Source& a, const Source& b, std::string reason) {
  note_read(a);
  note_read(b);
  add(make_code(Op::kEqSources, ExprKind::kEq, ref(a), ref(b)),
      a.to_string() + " == " + b.to_string(), std::move(reason));
}

void GuardProgram::add_equal_constant(const Source& a, int64_t value, std::string reason) {
  note_read(a);
  Code c = make_code(Op::kEqConst, ExprKind::kEq, ref(a));
  c.lo = value;
  add(c, a.to_string() + " == " + std::to_string(value), std::move(reason));
}

void GuardProgram::add_range(const Source& a, ValueRange range, std::string reason) {
  note_read(a);
  Code c = make_code(Op::kRange, ExprKind::kLe, ref(a));
  c.lo = range.lo;
  c.hi = range.hi;
  std::string text;
  if (range.lo != ValueRange::kNegInf) text += std::to_string(range.lo) + " <= ";
  text += a.to_string();
  if (range.hi != ValueRange::kPosInf) text += " <= " + std::to_string(range.hi);
  add(c, std::move(text), std::move(reason));
}

namespace {
PrintOptions source_printing(const GuardProgram::SourceOf& source_of) {
  PrintOptions o;
  o.style = PrintOptions::Style::kPython;
  o.symbol_namer = [&source_of](std::ostream& os, const Expr* s) {
    os << source_of(s).to_string();
  };
  return o;
}
}  // namespace

void GuardProgram::add_equal_expr(const Source& a, const Expr* e, const SourceOf& source_of,
                                  std::string reason) {
  note_read(a);
  Code c = make_code(Op::kExpr, ExprKind::kEq);
  Node n = make_node(NodeOp::kSource);
  n.src = ref(a);
  c.lhs = push(n);
  c.rhs = compile(e, source_of);
  add(c, a.to_string() + " == " + sym::to_string(e, source_printing(source_of)), std::move(reason));
}

void GuardProgram::add_condition(const Expr* rel, const SourceOf& source_of, std::string reason,
                                 std::string origin) {
  if (!rel->is_relation())
    throw SymError("[GuardProgram] add_condition: " + sym::to_string(rel) + " is not a relation");
  std::string text = sym::to_string(rel, source_printing(source_of));
  const Expr* l = rel->arg(0);
  const Expr* r = rel->arg(1);
  Code c = make_code(Op::kExpr, rel->kind());
  if (l->is_symbol() && r->is_int()) {
    Source s = source_of(l);
    note_read(s);
    c.op = Op::kCmpConst;
    c.a = ref(s);
    c.lo = r->value();
  } else if (r->is_symbol() && l->is_int()) {
    Source s = source_of(r);
    note_read(s);
    c.op = Op::kCmpConst;
    c.rel = flip(rel->kind());
    c.a = ref(s);
    c.lo = l->value();
  } else if (rel->kind() == ExprKind::kEq && l->kind() == ExprKind::kMod &&
             l->arg(0)->is_symbol() && l->arg(1)->is_int() && r->is_int()) {
    Source s = source_of(l->arg(0));
    note_read(s);
    c.op = Op::kModEqConst;
    c.a = ref(s);
    c.lo = l->arg(1)->value();
    c.hi = r->value();
  } else {
    c.lhs = compile(l, source_of);
    c.rhs = compile(r, source_of);
  }
  add(c, std::move(text), std::move(reason), std::move(origin));
}

std::string GuardProgram::to_string(bool with_origins) const {
  std::string out;
  for (const Instruction& i : info_) {
    out += i.text;
    if (!i.reason.empty()) out += "  # " + i.reason;
    if (with_origins && !i.origin.empty()) out += " (at " + i.origin + ")";
    out += '\n';
  }
  return out;
}

std::string GuardProgram::explain(std::span<const ArgView> inputs, GuardCheck result) const {
  if (result.ok()) return "all guards passed";
  if (static_cast<size_t>(result.failed) >= info_.size())
    return "guard " + std::to_string(result.failed) + " failed (no such instruction)";
  const Instruction& i = info_[result.failed];
  std::ostringstream os;
  os << "guard failed: " << i.text;
  if (!i.reason.empty()) os << "  # " << i.reason;
  const auto& reads = reads_[result.failed];
  os << "; actual: ";
  for (size_t k = 0; k < reads.size(); ++k) {
    if (k > 0) os << ", ";
    int64_t v;
    if (read_ref(ref(reads[k]), inputs, &v)) {
      os << reads[k].to_string() << " = " << v;
    } else {
      os << reads[k].to_string() << " is missing";
    }
  }
  return os.str();
}

}  // namespace lathe::sym
