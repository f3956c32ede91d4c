#include "lathe/sym/expr_pool.h"

#include <algorithm>
#include <unordered_map>

#include "lathe/sym/int_math.h"
#include "lathe/sym/polynomial.h"
#include "lathe/sym/sym_error.h"

namespace lathe::sym {

using detail::checked_add;
using detail::checked_mul;
using detail::gcd;

namespace {

size_t hash_combine(size_t seed, size_t v) {
  return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

const char* op_name(int op) {
  static const char* names[] = {"FloorDiv", "CeilDiv", "Mod"};
  return names[op];
}

}  // namespace

bool ExprPool::NodeEq::operator()(const Expr* a, const Expr* b) const {
  return a->kind_ == b->kind_ && a->flag_ == b->flag_ && a->value_ == b->value_ &&
         a->aux_ == b->aux_ && a->args_ == b->args_ && a->coeffs_ == b->coeffs_;
}

ExprPool::ExprPool(ShapeEnv* env, const SimplifyContext* context) : env_(env), context_(context) {
  Expr f;
  f.kind_ = ExprKind::kBool;
  false_ = intern(std::move(f));
  Expr t;
  t.kind_ = ExprKind::kBool;
  t.value_ = 1;
  true_ = intern(std::move(t));
}

ExprPool::~ExprPool() = default;

const Expr* ExprPool::intern(Expr&& c) {
  size_t h = hash_combine(static_cast<size_t>(c.kind_), static_cast<size_t>(c.value_));
  h = hash_combine(h, static_cast<size_t>(c.aux_) * 2 + c.flag_);
  for (const Expr* a : c.args_) h = hash_combine(h, reinterpret_cast<size_t>(a));
  for (int64_t v : c.coeffs_) h = hash_combine(h, static_cast<size_t>(v));
  c.hash_ = h;
  c.pool_ = this;
  auto it = interned_.find(&c);
  if (it != interned_.end()) return *it;
  auto owned = std::unique_ptr<Expr>(new Expr(std::move(c)));
  const Expr* e = owned.get();
  nodes_.push_back(std::move(owned));
  interned_.insert(e);
  return e;
}

const Expr* ExprPool::node(ExprKind kind, std::vector<const Expr*> args,
                           std::vector<int64_t> coeffs, int64_t value) {
  Expr c;
  c.kind_ = kind;
  c.value_ = value;
  c.args_ = std::move(args);
  c.coeffs_ = std::move(coeffs);
  return intern(std::move(c));
}

const Expr* ExprPool::integer(int64_t v) {
  Expr c;
  c.value_ = v;
  return intern(std::move(c));
}

const Expr* ExprPool::boolean(bool b) { return b ? true_ : false_; }

const Expr* ExprPool::new_symbol(int64_t id, int64_t display_index, bool unbacked) {
  Expr c;
  c.kind_ = ExprKind::kSymbol;
  c.value_ = id;
  c.aux_ = display_index;
  c.flag_ = unbacked;
  return intern(std::move(c));
}

const Expr* ExprPool::add(const Expr* a, const Expr* b) {
  require_integer(a);
  require_integer(b);
  if (a->is_int() && b->is_int()) return integer(checked_add(a->value(), b->value()));
  if (a->is_int() && a->value() == 0) return b;
  if (b->is_int() && b->value() == 0) return a;
  PolyOps ops(*this);
  PolyOps::Builder r;
  r.add(PolyOps::to_poly(a), 1);
  r.add(PolyOps::to_poly(b), 1);
  return ops.from_poly(r.finish());
}

const Expr* ExprPool::neg(const Expr* a) { return mul(integer(-1), a); }

const Expr* ExprPool::sub(const Expr* a, const Expr* b) {
  require_integer(a);
  require_integer(b);
  if (a->is_int() && b->is_int()) return integer(detail::checked_sub(a->value(), b->value()));
  PolyOps ops(*this);
  PolyOps::Builder r;
  r.add(PolyOps::to_poly(a), 1);
  r.add(PolyOps::to_poly(b), -1);
  return ops.from_poly(r.finish());
}

const Expr* ExprPool::mul(const Expr* a, const Expr* b) {
  require_integer(a);
  require_integer(b);
  if (a->is_int() && b->is_int()) return integer(checked_mul(a->value(), b->value()));
  if ((a->is_int() && a->value() == 0) || (b->is_int() && b->value() == 0)) return integer(0);
  if (a->is_int() && a->value() == 1) return b;
  if (b->is_int() && b->value() == 1) return a;
  PolyOps ops(*this);
  return ops.from_poly(ops.mul(PolyOps::to_poly(a), PolyOps::to_poly(b)));
}

const Expr* ExprPool::floordiv(const Expr* a, const Expr* b) { return divide(DivOp::kFloor, a, b); }
const Expr* ExprPool::ceildiv(const Expr* a, const Expr* b) { return divide(DivOp::kCeil, a, b); }
const Expr* ExprPool::mod(const Expr* a, const Expr* b) { return divide(DivOp::kMod, a, b); }

const Expr* ExprPool::divide(DivOp op, const Expr* a, const Expr* b) {
  require_integer(a);
  require_integer(b);
  if (b->is_int()) return divide_by_constant(op, a, b->value());
  return divide_by_expr(op, a, b);
}

namespace {
ExprKind div_kind(int op) {
  return op == 0 ? ExprKind::kFloorDiv : op == 1 ? ExprKind::kCeilDiv : ExprKind::kMod;
}
}  // namespace

const Expr* ExprPool::divide_by_constant(DivOp op, const Expr* a, int64_t k) {
  if (k == 0) {
    throw SymError(std::string("[sym] division by zero: ") + op_name(static_cast<int>(op)) + "(" +
                   to_string(a) + ", 0)");
  }
  if (a->is_int()) {
    int64_t v = a->value();
    switch (op) {
      case DivOp::kFloor:
        return integer(detail::checked_floordiv(v, k));
      case DivOp::kCeil:
        return integer(detail::checked_ceildiv(v, k));
      case DivOp::kMod:
        return integer(detail::checked_mod(v, k));
    }
  }
  if (k == 1 || k == -1) return op == DivOp::kMod ? integer(0) : (k == 1 ? a : neg(a));
  if (k < 0) {
    if (k == INT64_MIN) return node(div_kind(static_cast<int>(op)), {a, integer(k)});
    // a // -k == (-a) // k, and a % -k == -((-a) % k): keep divisors positive.
    if (op == DivOp::kMod) return neg(mod(neg(a), integer(-k)));
    return divide_by_constant(op, neg(a), -k);
  }
  PolyOps ops(*this);
  Poly p = PolyOps::to_poly(a);
  PolyOps::Builder quotient, residual;
  // Pull the multiples of k out: whole terms whose coefficient k divides, and the constant's
  // multiple (rounded down for floor and mod, up for ceil).
  int64_t qc = 0;
  if (op == DivOp::kCeil) {
    qc = detail::checked_ceildiv(p.constant, k);
  } else {
    qc = detail::checked_floordiv(p.constant, k);
  }
  quotient.add_term(nullptr, qc);
  residual.add_term(nullptr, detail::checked_sub(p.constant, checked_mul(qc, k)));
  for (auto& [m, c] : p.terms) {
    if (c % k == 0) {
      quotient.add_term(m, c / k);
    } else {
      residual.add_term(m, op == DivOp::kMod ? c % k : c);
    }
  }
  Poly r = residual.finish();
  int64_t g = gcd(PolyOps::content(r), k);
  if (g > 1) {
    r = PolyOps::divide_exact(r, g);
    k /= g;
  }
  const Expr* x = ops.from_poly(r);
  if (op == DivOp::kMod) {
    const Expr* m = residual_mod(x, k);
    return g > 1 ? mul(integer(g), m) : m;
  }
  const Expr* d = residual_div(op, x, k);
  return add(ops.from_poly(quotient.finish()), d);
}

const Expr* ExprPool::residual_mod(const Expr* x, int64_t k) {
  ValueRange rx = bound(x);
  if (x->is_int()) {
    return integer(detail::checked_mod(x->value(), k));
  } else if (k == 1 || divisible(x, k)) {
    return integer(0);
  } else if (rx.lo != ValueRange::kNegInf && rx.hi != ValueRange::kPosInf &&
             detail::checked_floordiv(rx.lo, k) == detail::checked_floordiv(rx.hi, k)) {
    // x stays within one period: x % k == x - k * (x // k) with x // k constant.
    return sub(x, integer(checked_mul(k, detail::checked_floordiv(rx.lo, k))));
  } else if (x->kind() == ExprKind::kMod && x->arg(1)->is_int() && x->arg(1)->value() > 0 &&
             x->arg(1)->value() % k == 0) {
    return mod(x->arg(0), integer(k));
  }
  return node(ExprKind::kMod, {x, integer(k)});
}

const Expr* ExprPool::residual_div(DivOp op, const Expr* x, int64_t k) {
  ValueRange rx = bound(x);
  int64_t merged = 0;
  if (x->is_int()) {
    return integer(op == DivOp::kFloor ? detail::checked_floordiv(x->value(), k)
                                       : detail::checked_ceildiv(x->value(), k));
  } else if (k == 1) {
    return x;
  } else if (rx.lo != ValueRange::kNegInf && rx.hi != ValueRange::kPosInf &&
             (op == DivOp::kFloor
                  ? detail::checked_floordiv(rx.lo, k) == detail::checked_floordiv(rx.hi, k)
                  : detail::checked_ceildiv(rx.lo, k) == detail::checked_ceildiv(rx.hi, k))) {
    return integer(op == DivOp::kFloor ? detail::checked_floordiv(rx.lo, k)
                                       : detail::checked_ceildiv(rx.lo, k));
  } else if (x->kind() == div_kind(static_cast<int>(op)) && x->arg(1)->is_int() &&
             x->arg(1)->value() > 0 && detail::try_mul(x->arg(1)->value(), k, &merged)) {
    // floor(floor(y / m) / k) == floor(y / (m * k)) for k > 0; the same holds for ceil.
    return divide_by_constant(op, x->arg(0), merged);
  } else if (op == DivOp::kCeil && divisible(x, k)) {
    return node(ExprKind::kFloorDiv, {x, integer(k)});  // exact: ceil == floor
  }
  return node(div_kind(static_cast<int>(op)), {x, integer(k)});
}

const Expr* ExprPool::divide_by_expr(DivOp op, const Expr* a, const Expr* b) {
  if (a == b) return integer(op == DivOp::kMod ? 0 : 1);
  if (a->is_int() && a->value() == 0) return a;
  PolyOps ops(*this);
  Poly pa = PolyOps::to_poly(a);
  Poly pb = PolyOps::to_poly(b);
  PolyOps::Builder quotient, residual;
  residual.add_term(nullptr, pa.constant);
  if (pb.terms.size() == 1 && pb.constant == 0) {
    // b is c_b * M_b: terms c * M of a with c_b | c and M_b | M are exact multiples.
    auto [mb, cb] = pb.terms[0];
    for (auto& [m, c] : pa.terms) {
      bool ok = false;
      const Expr* q = c % cb == 0 ? ops.divide_monomial(m, mb, ok) : nullptr;
      if (ok) {
        if (op != DivOp::kMod) quotient.add_term(q, c / cb);
      } else {
        residual.add_term(m, c);
      }
    }
  } else {
    for (auto& [m, c] : pa.terms) residual.add_term(m, c);
  }
  Poly r = residual.finish();
  int64_t g = gcd(PolyOps::content(r), PolyOps::content(pb));
  if (g > 1) {
    r = PolyOps::divide_exact(r, g);
    pb = PolyOps::divide_exact(pb, g);
  }
  const Expr* x = ops.from_poly(r);
  const Expr* y = ops.from_poly(pb);
  const Expr* q = ops.from_poly(quotient.finish());
  ValueRange ry = bound(y), rx = bound(x);
  bool small = ry.lo >= 1 && rx.lo >= 0 && rx.hi < ry.lo;  // 0 <= x < y
  const Expr* d;
  if (op == DivOp::kMod) {
    if (x->is_int() && x->value() == 0) {
      d = x;
    } else if (x == y) {
      d = integer(0);
    } else if (small) {
      d = x;
    } else if (y->is_int()) {
      d = mod(x, y);
    } else {
      d = node(ExprKind::kMod, {x, y});
    }
    return g > 1 ? mul(integer(g), d) : d;
  }
  if (x->is_int() && x->value() == 0) {
    d = x;
  } else if (x == y) {
    d = integer(1);
  } else if (small && op == DivOp::kFloor) {
    d = integer(0);
  } else if (y->is_int()) {
    d = divide_by_constant(op, x, y->value());
  } else if (x->kind() == div_kind(static_cast<int>(op)) && ry.lo >= 1) {
    // floor(floor(z / w) / y) == floor(z / (w * y)) for integer y >= 1; likewise ceil.
    d = divide(op, x->arg(0), mul(x->arg(1), y));
  } else {
    d = node(div_kind(static_cast<int>(op)), {x, y});
  }
  return add(q, d);
}

const Expr* ExprPool::min(const Expr* a, const Expr* b) { return min_max(ExprKind::kMin, a, b); }
const Expr* ExprPool::max(const Expr* a, const Expr* b) { return min_max(ExprKind::kMax, a, b); }

const Expr* ExprPool::min_max(ExprKind kind, const Expr* a, const Expr* b) {
  require_integer(a);
  require_integer(b);
  bool is_min = kind == ExprKind::kMin;
  std::vector<const Expr*> args;
  for (const Expr* e : {a, b}) {
    if (e->kind() == kind) {
      args.insert(args.end(), e->args().begin(), e->args().end());
    } else {
      args.push_back(e);
    }
  }
  // Drop every argument another one provably dominates (for Min: x <= y drops y).
  std::vector<bool> dropped(args.size(), false);
  for (size_t i = 0; i < args.size(); ++i) {
    for (size_t j = 0; j < args.size(); ++j) {
      if (i == j || dropped[i] || dropped[j]) continue;
      if (args[i] == args[j]) {
        dropped[j] = true;
        continue;
      }
      ValueRange d = bound(sub(args[i], args[j]));
      if (is_min ? d.hi <= 0 : d.lo >= 0) dropped[j] = true;
    }
  }
  std::vector<const Expr*> kept;
  for (size_t i = 0; i < args.size(); ++i)
    if (!dropped[i]) kept.push_back(args[i]);
  if (kept.size() == 1) return kept[0];
  std::sort(kept.begin(), kept.end(),
            [](const Expr* x, const Expr* y) { return compare(x, y) < 0; });
  return node(kind, std::move(kept));
}

const Expr* ExprPool::relation(ExprKind kind, const Expr* a, const Expr* b) {
  if (!(kind >= ExprKind::kEq && kind <= ExprKind::kGe))
    throw SymError("[sym] relation: kind is not a comparison");
  require_integer(a);
  require_integer(b);
  PolyOps ops(*this);
  PolyOps::Builder diff;
  diff.add(PolyOps::to_poly(a), 1);
  diff.add(PolyOps::to_poly(b), -1);
  Poly d = diff.finish();
  auto holds = [&](int64_t v) {
    switch (kind) {
      case ExprKind::kEq:
        return v == 0;
      case ExprKind::kNe:
        return v != 0;
      case ExprKind::kLt:
        return v < 0;
      case ExprKind::kLe:
        return v <= 0;
      case ExprKind::kGt:
        return v > 0;
      default:
        return v >= 0;
    }
  };
  if (d.terms.empty()) return boolean(holds(d.constant));
  // Divide by the gcd of the coefficients; an integer P' compared with a fraction rounds.
  int64_t g = 0;
  for (auto& [m, c] : d.terms) g = gcd(g, c);
  if (g > 1) {
    int64_t c = d.constant;
    if (c % g != 0 && (kind == ExprKind::kEq || kind == ExprKind::kNe))
      return boolean(kind == ExprKind::kNe);
    int64_t t = 0;  // P' op -c/g becomes P' + c' op 0
    bool down = kind == ExprKind::kGt || kind == ExprKind::kLe;
    t = down ? detail::checked_floordiv(-c, g) : detail::checked_ceildiv(-c, g);
    d.constant = -t;
    for (auto& [m, coeff] : d.terms) coeff /= g;
  }
  const Expr* de = ops.from_poly(d);
  if (de->is_int()) return boolean(holds(de->value()));
  ValueRange r = bound(de);
  bool all = false, none = false;
  switch (kind) {
    case ExprKind::kEq:
      all = r.lo == 0 && r.hi == 0;
      none = r.lo > 0 || r.hi < 0;
      break;
    case ExprKind::kNe:
      none = r.lo == 0 && r.hi == 0;
      all = r.lo > 0 || r.hi < 0;
      break;
    case ExprKind::kLt:
      all = r.hi < 0;
      none = r.lo >= 0;
      break;
    case ExprKind::kLe:
      all = r.hi <= 0;
      none = r.lo > 0;
      break;
    case ExprKind::kGt:
      all = r.lo > 0;
      none = r.hi <= 0;
      break;
    default:
      all = r.lo >= 0;
      none = r.hi < 0;
      break;
  }
  if (all) return boolean(true);
  if (none) return boolean(false);
  // Positive terms on the left, negated negative terms on the right: "s0 > 4", "s0 == s1".
  Poly pd = PolyOps::to_poly(de), lhs, rhs;
  for (auto& [m, c] : pd.terms) (c > 0 ? lhs : rhs).terms.push_back({m, c > 0 ? c : -c});
  if (pd.constant > 0) {
    lhs.constant = pd.constant;
  } else {
    rhs.constant = detail::checked_neg(pd.constant);
  }
  return node(kind, {ops.from_poly(lhs), ops.from_poly(rhs)});
}

const Expr* ExprPool::negate(const Expr* rel) {
  if (rel->is_bool()) return boolean(rel->value() == 0);
  if (!rel->is_relation()) throw SymError("[sym] negate: not a condition: " + to_string(rel));
  return relation(negate_relation(rel->kind()), rel->arg(0), rel->arg(1));
}

const Expr* ExprPool::substitute(const Expr* e, const std::function<const Expr*(const Expr*)>& f) {
  std::unordered_map<const Expr*, const Expr*> memo;
  std::function<const Expr*(const Expr*)> go = [&](const Expr* x) -> const Expr* {
    auto it = memo.find(x);
    if (it != memo.end()) return it->second;
    const Expr* r = x;
    switch (x->kind()) {
      case ExprKind::kInt:
      case ExprKind::kBool:
        break;
      case ExprKind::kSymbol:
        r = f(x);
        break;
      case ExprKind::kAdd: {
        r = integer(x->value());
        for (size_t i = 0; i < x->args().size(); ++i)
          r = add(r, mul(integer(x->coeffs()[i]), go(x->arg(i))));
        break;
      }
      case ExprKind::kMul: {
        r = integer(1);
        for (size_t i = 0; i < x->args().size(); ++i) {
          const Expr* base = go(x->arg(i));
          for (int64_t k = 0; k < x->coeffs()[i]; ++k) r = mul(r, base);
        }
        break;
      }
      case ExprKind::kFloorDiv:
        r = floordiv(go(x->arg(0)), go(x->arg(1)));
        break;
      case ExprKind::kCeilDiv:
        r = ceildiv(go(x->arg(0)), go(x->arg(1)));
        break;
      case ExprKind::kMod:
        r = mod(go(x->arg(0)), go(x->arg(1)));
        break;
      case ExprKind::kMin:
      case ExprKind::kMax: {
        r = go(x->arg(0));
        for (size_t i = 1; i < x->args().size(); ++i) r = min_max(x->kind(), r, go(x->arg(i)));
        break;
      }
      default:
        r = relation(x->kind(), go(x->arg(0)), go(x->arg(1)));
        break;
    }
    memo.emplace(x, r);
    return r;
  };
  return go(e);
}

ValueRange ExprPool::bound(const Expr* e) const {
  switch (e->kind()) {
    case ExprKind::kInt:
      return ValueRange::exact(e->value());
    case ExprKind::kBool:
      return ValueRange::exact(e->value());
    case ExprKind::kSymbol:
      return context_ ? context_->symbol_range(e) : ValueRange::unknown();
    case ExprKind::kAdd: {
      ValueRange r = ValueRange::exact(e->value());
      for (size_t i = 0; i < e->args().size(); ++i)
        r = range_add(r, range_scale(bound(e->arg(i)), e->coeffs()[i]));
      return r;
    }
    case ExprKind::kMul: {
      ValueRange r = ValueRange::exact(1);
      for (size_t i = 0; i < e->args().size(); ++i)
        r = range_mul(r, range_pow(bound(e->arg(i)), e->coeffs()[i]));
      return r;
    }
    case ExprKind::kFloorDiv:
      return range_floordiv(bound(e->arg(0)), bound(e->arg(1)));
    case ExprKind::kCeilDiv:
      return range_ceildiv(bound(e->arg(0)), bound(e->arg(1)));
    case ExprKind::kMod:
      return range_mod(bound(e->arg(0)), bound(e->arg(1)));
    case ExprKind::kMin:
    case ExprKind::kMax: {
      ValueRange r = bound(e->arg(0));
      for (size_t i = 1; i < e->args().size(); ++i)
        r = e->kind() == ExprKind::kMin ? range_min(r, bound(e->arg(i)))
                                        : range_max(r, bound(e->arg(i)));
      return r;
    }
    default:
      return {0, 1};
  }
}

std::optional<bool> ExprPool::decide(const Expr* rel) {
  if (rel->is_bool()) return rel->value() != 0;
  if (!rel->is_relation()) throw SymError("[sym] decide: not a condition: " + to_string(rel));
  // relation() already folds what the ranges prove; rebuilding applies the current ranges.
  const Expr* r = relation(rel->kind(), rel->arg(0), rel->arg(1));
  if (r->is_bool()) return r->value() != 0;
  return std::nullopt;
}

bool ExprPool::divisible(const Expr* e, int64_t k) const {
  if (k < 0) k = k == INT64_MIN ? 0 : -k;
  if (k == 0) return e->is_int() && e->value() == 0;
  if (k == 1) return true;
  if (e->is_int()) return e->value() % k == 0;
  if (context_ && context_->known_divisible(e, k)) return true;
  if (e->kind() == ExprKind::kAdd) {
    if (e->value() % k != 0) return false;
    for (size_t i = 0; i < e->args().size(); ++i) {
      int64_t c = e->coeffs()[i];
      if (c % k != 0 && !divisible(e->arg(i), k / gcd(c, k))) return false;
    }
    return true;
  }
  if (e->kind() == ExprKind::kMul) {
    for (const Expr* f : e->args())
      if (divisible(f, k)) return true;
  }
  return false;
}

}  // namespace lathe::sym
