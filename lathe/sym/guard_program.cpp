#include "lathe/sym/guard_program.h"

#include <algorithm>
#include <bit>
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

// Reads one source; false when the slot, the dim or the kind of argument does not match.
template <typename Ref>
static inline bool read_ref(const Ref& r, std::span<const ArgView> in, int64_t* out) noexcept {
  if (static_cast<size_t>(static_cast<uint32_t>(r.arg)) >= in.size()) [[unlikely]]
    return false;
  const ArgView& a = in[r.arg];
  if (r.kind == Source::Kind::kScalar) {
    *out = a.scalar;
    return a.rank == -1;
  }
  const int64_t* base = r.kind == Source::Kind::kSize ? a.sizes : a.strides;
  if (r.dim >= a.rank || base == nullptr) [[unlikely]]
    return false;
  *out = base[r.dim];
  return true;
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
      case Op::kMaskEqConst:
        ok = read_ref(c.a, inputs, &x) && (x & c.lo) == c.hi;
        break;
      case Op::kExpr:
        ok = eval(c, inputs, &x, &y) && holds(c.rel, x, y);
        break;
    }
    if (!ok) [[unlikely]]
      return GuardCheck{static_cast<int32_t>(i)};
  }
  return GuardCheck{};
}

bool GuardProgram::eval(const Code& c, std::span<const ArgView> in, int64_t* x,
                        int64_t* y) const noexcept {
  // The top of the stack lives in a register; the rest in a fixed array (depth <= kMaxStack).
  int64_t stack[kMaxStack];
  int sp = 0;
  int64_t top = 0;
  const Node* n = nodes_.data() + c.lhs;
  const Node* end = nodes_.data() + c.rhs;
  for (; n != end; ++n) {
    int64_t v;
    switch (n->op) {
      case NodeOp::kConst:
        stack[sp++] = top;
        top = n->value;
        continue;
      case NodeOp::kSource:
        if (!read_ref(n->src, in, &v)) return false;
        stack[sp++] = top;
        top = v;
        continue;
      default:
        break;
    }
    int64_t a = stack[--sp];
    bool ok = true;
    switch (n->op) {
      case NodeOp::kAdd:
        ok = detail::try_add(a, top, &top);
        break;
      case NodeOp::kMul:
        ok = detail::try_mul(a, top, &top);
        break;
      case NodeOp::kFloorDiv:
        ok = detail::try_floordiv(a, top, &top);
        break;
      case NodeOp::kCeilDiv:
        ok = detail::try_ceildiv(a, top, &top);
        break;
      case NodeOp::kMod:
        ok = detail::try_mod(a, top, &top);
        break;
      case NodeOp::kMin:
        top = std::min(a, top);
        break;
      case NodeOp::kMax:
        top = std::max(a, top);
        break;
      case NodeOp::kAndMask:
        top = a & top;
        break;
      case NodeOp::kShiftRight:
        top = a >> top;
        break;
      default:
        ok = false;
    }
    if (!ok) return false;
  }
  // Two values were pushed above the initial (unused) slot 0.
  *x = stack[1];
  *y = top;
  return true;
}

void GuardProgram::note_read(const Source& s) {
  if (std::find(pending_reads_.begin(), pending_reads_.end(), s) == pending_reads_.end())
    pending_reads_.push_back(s);
}

int GuardProgram::compile(const Expr* e, const SourceOf& source_of) {
  auto constant = [&](int64_t v) {
    Node n = make_node(NodeOp::kConst);
    n.value = v;
    push(n);
  };
  switch (e->kind()) {
    case ExprKind::kInt:
      constant(e->value());
      return 1;
    case ExprKind::kSymbol: {
      Source s = source_of(e);
      note_read(s);
      Node n = make_node(NodeOp::kSource);
      n.src = ref(s);
      push(n);
      return 1;
    }
    case ExprKind::kAdd: {
      // value + c0*m0 + c1*m1 ...: the running sum stays on the stack below each term.
      bool first = true;
      int depth = 1;
      if (e->value() != 0) {
        constant(e->value());
        first = false;
      }
      for (size_t i = 0; i < e->args().size(); ++i) {
        int base = first ? 0 : 1;
        int d = compile(e->arg(i), source_of);
        if (e->coeffs()[i] != 1) {
          constant(e->coeffs()[i]);
          push_op(NodeOp::kMul);
          d = std::max(d, 2);
        }
        depth = std::max(depth, base + d);
        if (!first) push_op(NodeOp::kAdd);
        first = false;
      }
      return depth;
    }
    case ExprKind::kMul: {
      bool first = true;
      int depth = 1;
      for (size_t i = 0; i < e->args().size(); ++i) {
        for (int64_t k = 0; k < e->coeffs()[i]; ++k) {
          int d = compile(e->arg(i), source_of);
          depth = std::max(depth, (first ? 0 : 1) + d);
          if (!first) push_op(NodeOp::kMul);
          first = false;
        }
      }
      return depth;
    }
    case ExprKind::kFloorDiv:
    case ExprKind::kCeilDiv:
    case ExprKind::kMod:
    case ExprKind::kMin:
    case ExprKind::kMax: {
      NodeOp op = e->kind() == ExprKind::kFloorDiv  ? NodeOp::kFloorDiv
                  : e->kind() == ExprKind::kCeilDiv ? NodeOp::kCeilDiv
                  : e->kind() == ExprKind::kMod     ? NodeOp::kMod
                  : e->kind() == ExprKind::kMin     ? NodeOp::kMin
                                                    : NodeOp::kMax;
      int64_t k = e->arg(1)->is_int() ? e->arg(1)->value() : 0;
      if ((op == NodeOp::kMod || op == NodeOp::kFloorDiv) && k > 0 && (k & (k - 1)) == 0) {
        // Two's complement makes & and >> exactly Python's % and // by a power of two.
        int depth = compile(e->arg(0), source_of);
        constant(op == NodeOp::kMod ? k - 1 : std::countr_zero(static_cast<uint64_t>(k)));
        push_op(op == NodeOp::kMod ? NodeOp::kAndMask : NodeOp::kShiftRight);
        return std::max(depth, 2);
      }
      int depth = compile(e->arg(0), source_of);
      for (size_t i = 1; i < e->args().size(); ++i) {
        depth = std::max(depth, 1 + compile(e->arg(i), source_of));
        push_op(op);
      }
      return depth;
    }
    default:
      throw SymError("[GuardProgram] cannot compile the condition " + sym::to_string(e) +
                     " as an integer expression");
  }
}

void GuardProgram::finish_expr(Code& c, int depth, const std::string& text) {
  c.rhs = static_cast<int32_t>(nodes_.size());
  if (depth > kMaxStack) {
    nodes_.resize(c.lhs);
    pending_reads_.clear();
    throw SymError("[GuardProgram] the guard " + text + " needs an evaluation stack of " +
                   std::to_string(depth) + " values; the limit is " + std::to_string(kMaxStack));
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
  c.lhs = static_cast<int32_t>(nodes_.size());
  Node n = make_node(NodeOp::kSource);
  n.src = ref(a);
  push(n);
  int depth = 1 + compile(e, source_of);
  std::string text = a.to_string() + " == " + sym::to_string(e, source_printing(source_of));
  finish_expr(c, depth, text);
  add(c, std::move(text), std::move(reason));
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
    int64_t k = l->arg(1)->value();
    c.op = Op::kModEqConst;
    c.a = ref(s);
    c.lo = k;
    c.hi = r->value();
    if (k > 0 && (k & (k - 1)) == 0) {
      c.op = Op::kMaskEqConst;
      c.lo = k - 1;
    }
  } else {
    c.lhs = static_cast<int32_t>(nodes_.size());
    int depth = compile(l, source_of);
    depth = std::max(depth, 1 + compile(r, source_of));
    finish_expr(c, depth, text);
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
