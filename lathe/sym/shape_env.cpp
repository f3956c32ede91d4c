#include "lathe/sym/shape_env.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "lathe/sym/flag_scope.h"
#include "lathe/sym/int_math.h"
#include "lathe/sym/sym_error.h"

namespace lathe::sym {
namespace {

std::string origin_of(const std::source_location& loc) {
  std::string file = loc.file_name();
  size_t slash = file.find_last_of('/');
  if (slash != std::string::npos) file = file.substr(slash + 1);
  return file + ":" + std::to_string(loc.line());
}

// lhs - rhs of a relation as (terms, constant).
struct Linear {
  const Expr* symbol = nullptr;
  int64_t coeff = 0;
  int64_t constant = 0;
};

// Matches diff == coeff * symbol + constant; nullopt when diff has another shape.
std::optional<Linear> as_linear(const Expr* diff) {
  if (diff->is_symbol()) return Linear{diff, 1, 0};
  if (diff->kind() == ExprKind::kAdd && diff->args().size() == 1 && diff->arg(0)->is_symbol())
    return Linear{diff->arg(0), diff->coeffs()[0], diff->value()};
  return std::nullopt;
}

}  // namespace

ShapeEnv::ShapeEnv(ShapeEnvOptions options) : options_(options), pool_(this, this) {}

ShapeEnv::~ShapeEnv() = default;

void ShapeEnv::invalidate() { simplified_.clear(); }

const Expr* ShapeEnv::new_symbol(std::optional<int64_t> hint, ValueRange range, bool unbacked) {
  int64_t id = static_cast<int64_t>(symbols_.size());
  int64_t display = unbacked ? unbacked_count_++ : backed_count_++;
  SymbolInfo s;
  s.expr = pool_.new_symbol(id, display, unbacked);
  s.hint = hint;
  s.range = range;
  s.base_range = range;
  symbols_.push_back(std::move(s));
  return symbols_.back().expr;
}

SymInt ShapeEnv::create_symbol(int64_t hint, const Source& source, DimPolicy policy) {
  std::string name = source.to_string();
  if (source_index_.count(source.key()))
    throw SymError("[ShapeEnv] create_symbol: " + name + " already has a symbol");
  bool scalar = source.kind() == Source::Kind::kScalar;
  if (!scalar && hint < 0) {
    throw SymError("[ShapeEnv] create_symbol: " + name + " has the negative size " +
                   std::to_string(hint));
  }
  auto register_source = [&](const Expr* e, std::string reason, bool shared) {
    source_index_[source.key()] = static_cast<int>(sources_.size());
    sources_.push_back({source, e, std::move(reason), shared});
    if (e->is_symbol() && info(e).first_source < 0)
      info(e).first_source = static_cast<int>(sources_.size()) - 1;
  };
  auto constraint = constraints_.find(source.key());
  bool zero_one = !scalar && options_.specialize_zero_one && (hint == 0 || hint == 1);
  if (constraint != constraints_.end()) {
    const ValueRange& r = constraint->second;
    if (zero_one) {
      throw ConstraintViolation("[ShapeEnv] constraint violation: " + name +
                                " was marked dynamic with range " + r.to_string() +
                                ", but its size " + std::to_string(hint) +
                                " is specialized (sizes 0 and 1 are always specialized); trace "
                                "with a size of at least 2 or do not mark it dynamic");
    }
    if (!r.contains(hint)) {
      throw ConstraintViolation(
          "[ShapeEnv] constraint violation: " + name + " was marked dynamic with range " +
          r.to_string() + ", but the traced value " + std::to_string(hint) + " is outside it");
    }
    policy = DimPolicy::kDynamic;
  }
  if (policy == DimPolicy::kStatic || zero_one) {
    std::string why = zero_one ? "size 0/1 specialization"
                      : scalar ? "static scalar"
                               : "static dim";
    register_source(pool_.integer(hint), why, false);
    return SymInt(hint);
  }
  bool duck = policy == DimPolicy::kDuck && options_.duck_sizing && !scalar;
  if (duck) {
    auto it = duck_.find(hint);
    if (it != duck_.end()) {
      const Expr* s = it->second;
      register_source(
          s, "duck sizing: traced equal to " + sources_[info(s).first_source].source.to_string(),
          true);
      return SymInt::from_expr(s);
    }
  }
  ValueRange range =
      scalar ? ValueRange::unknown() : ValueRange::at_least(options_.specialize_zero_one ? 2 : 0);
  std::string range_reason = "dynamic dim (0 and 1 are specialized)";
  if (constraint != constraints_.end()) {
    range = range.intersect(constraint->second);
    range_reason = "mark_dynamic range " + constraint->second.to_string();
  }
  const Expr* s = new_symbol(hint, range, false);
  info(s).range_reason = range_reason;
  if (constraint != constraints_.end()) info(s).user_range = range;
  if (duck) duck_[hint] = s;
  std::string why = constraint != constraints_.end() ? "marked dynamic"
                    : scalar                         ? "dynamic scalar"
                    : duck                           ? "dynamic dim (duck sized)"
                                                     : "dynamic dim";
  register_source(s, why, false);
  return SymInt::from_expr(s);
}

SymInt ShapeEnv::create_unbacked_symbol(std::string_view origin, ValueRange range) {
  const Expr* s = new_symbol(std::nullopt, range, true);
  info(s).origin = std::string(origin);
  return SymInt::from_expr(s);
}

void ShapeEnv::mark_dynamic(const Source& source, int64_t min, int64_t max) {
  if (min > max) {
    throw SymError("[ShapeEnv] mark_dynamic(" + source.to_string() + "): min " +
                   std::to_string(min) + " is greater than max " + std::to_string(max));
  }
  if (source_index_.count(source.key())) {
    throw SymError("[ShapeEnv] mark_dynamic(" + source.to_string() +
                   ") must come before create_symbol for that source");
  }
  constraints_[source.key()] = ValueRange{min, max};
}

ValueRange ShapeEnv::symbol_range(const Expr* symbol) const {
  const SymbolInfo& s = info(symbol);
  return base_mode_ ? s.base_range : s.range;
}

bool ShapeEnv::known_divisible(const Expr* e, int64_t k) const {
  if (base_mode_) return false;
  for (auto& [x, m] : divisible_)
    if (x == e && m % k == 0) return true;
  return false;
}

ValueRange ShapeEnv::range_of(const Expr* symbol) const { return symbol_range(symbol); }

std::string ShapeEnv::specialization_reason(const Expr* symbol) {
  if (!simplify(symbol)->is_int()) return "";
  const Expr* s = symbol;
  std::string reason;
  while (s->is_symbol() && info(s).replaced_by != nullptr) {
    reason = info(s).replacement_reason;
    s = info(s).replaced_by;
  }
  return reason;
}

const Expr* ShapeEnv::simplify(const Expr* e) {
  auto it = simplified_.find(e);
  if (it != simplified_.end()) return it->second;
  const Expr* r = pool_.substitute(e, [this](const Expr* sym) -> const Expr* {
    SymbolInfo& s = info(sym);
    if (s.replacement == nullptr) return sym;
    // Path compression: a replacement's target may itself have been replaced since.
    s.replacement = simplify(s.replacement);
    return s.replacement;
  });
  simplified_[e] = r;
  simplified_[r] = r;
  return r;
}

ValueRange ShapeEnv::bound(SymInt v) {
  if (!v.is_symbolic()) return ValueRange::exact(v.expect_int());
  return pool_.bound(simplify(v.expr()));
}

int64_t ShapeEnv::hint_of(const Expr* e) const {
  std::vector<const Expr*> syms;
  collect_symbols(e, syms);
  std::vector<int64_t> values(symbols_.size(), 0);
  for (const Expr* s : syms) {
    const SymbolInfo& i = info(s);
    if (!i.hint) {
      throw DataDependentError("[ShapeEnv] " + to_string(e) + " has no hint: " + to_string(s) +
                               " is data-dependent (from " + i.origin + ")");
    }
    values[s->value()] = *i.hint;
  }
  return sym::evaluate(e, values);
}

std::string ShapeEnv::source_name(const Expr* symbol) const {
  const SymbolInfo& s = info(symbol);
  if (s.first_source < 0) return to_string(symbol);
  return sources_[s.first_source].source.to_string();
}

std::string ShapeEnv::describe(const Expr* e) const {
  PrintOptions o;
  o.style = PrintOptions::Style::kPython;
  o.symbol_namer = [this](std::ostream& os, const Expr* s) { os << source_name(s); };
  return to_string(e, o);
}

std::optional<bool> ShapeEnv::static_value(SymBool cond) {
  if (!cond.is_symbolic()) return cond.expect_bool();
  const Expr* e = simplify(cond.expr());
  if (e->is_bool()) return e->value() != 0;
  return std::nullopt;
}

void ShapeEnv::check_backed(const Expr* cond, std::string_view reason, const std::string& origin) {
  std::vector<const Expr*> syms;
  collect_symbols(cond, syms);
  std::string unbacked;
  for (const Expr* s : syms) {
    if (info(s).hint) continue;
    if (!unbacked.empty()) unbacked += ", ";
    unbacked += to_string(s) + " (from " + info(s).origin + ")";
  }
  if (unbacked.empty()) return;
  throw DataDependentError(
      "[ShapeEnv] cannot guard on the data-dependent condition " + to_string(cond) + " (" +
      std::string(reason) + ", at " + origin + "): " + unbacked +
      " has no value at trace time. Avoid branching on it (e.g. compute with sym_min/sym_max), "
      "or state what is known with ShapeEnv::assume(condition) or "
      "ShapeEnv::constrain_range(symbol, min, max)");
}

bool ShapeEnv::evaluate(SymBool cond, std::string_view reason, std::source_location loc) {
  if (!cond.is_symbolic()) return cond.expect_bool();
  if (cond.expr()->pool() != &pool_)
    throw SymError("[ShapeEnv] evaluate: the condition belongs to another ShapeEnv");
  const Expr* e = simplify(cond.expr());
  if (e->is_bool()) return e->value() != 0;
  if (std::optional<bool> known = decided_by_guards(e)) return *known;
  if (std::optional<bool> proved = decide_by_division(e)) return *proved;
  std::string origin = origin_of(loc);
  check_backed(e, reason, origin);
  bool value = hint_of(e) != 0;
  record_guard(value ? e : pool_.negate(e), reason, origin);
  return value;
}

int64_t ShapeEnv::evaluate_int(SymInt v, std::string_view reason, std::source_location loc) {
  if (!v.is_symbolic()) return v.expect_int();
  const Expr* e = simplify(v.expr());
  if (e->is_int()) return e->value();
  std::string origin = origin_of(loc);
  const Expr* cond = pool_.relation(ExprKind::kEq, e, pool_.integer(0));
  check_backed(cond, reason, origin);
  int64_t value = hint_of(e);
  cond = pool_.relation(ExprKind::kEq, e, pool_.integer(value));
  if (!cond->is_bool()) record_guard(cond, reason, origin);
  return value;
}

std::optional<bool> ShapeEnv::decided_by_guards(const Expr* cond) {
  if (guarded_.empty() || !cond->is_relation()) return std::nullopt;
  // The same relation with its sides swapped (a <= b is b >= a).
  auto flipped = [&](const Expr* c) -> const Expr* {
    switch (c->kind()) {
      case ExprKind::kLt:
        return pool_.relation(ExprKind::kGt, c->arg(1), c->arg(0));
      case ExprKind::kLe:
        return pool_.relation(ExprKind::kGe, c->arg(1), c->arg(0));
      case ExprKind::kGt:
        return pool_.relation(ExprKind::kLt, c->arg(1), c->arg(0));
      case ExprKind::kGe:
        return pool_.relation(ExprKind::kLe, c->arg(1), c->arg(0));
      default:
        return pool_.relation(c->kind(), c->arg(1), c->arg(0));
    }
  };
  for (const Expr* c : {cond, flipped(cond)})
    if (guarded_.count(c)) return true;
  const Expr* negated = pool_.negate(cond);
  if (!negated->is_relation()) return std::nullopt;
  for (const Expr* c : {negated, flipped(negated)})
    if (guarded_.count(c)) return false;
  return std::nullopt;
}

std::optional<bool> ShapeEnv::decide_by_division(const Expr* cond) {
  if (!cond->is_relation()) return std::nullopt;
  try {
    const Expr* diff = pool_.sub(cond->arg(0), cond->arg(1));  // cond is `diff R 0`
    if (diff->kind() != ExprKind::kAdd) return std::nullopt;
    auto constant_divisor = [](const Expr* m) -> int64_t {
      bool div = m->kind() == ExprKind::kFloorDiv || m->kind() == ExprKind::kCeilDiv;
      if (!div || !m->arg(1)->is_int() || m->arg(1)->value() <= 0) return 0;
      return m->arg(1)->value();
    };
    int64_t scale = 1;
    for (const Expr* m : diff->args())
      if (int64_t k = constant_divisor(m)) scale = std::lcm(scale, k);
    if (scale == 1 || scale > (int64_t{1} << 20)) return std::nullopt;
    const Expr* scaled = pool_.integer(detail::checked_mul(diff->value(), scale));
    for (size_t i = 0; i < diff->args().size(); ++i) {
      const Expr* m = diff->arg(i);
      const int64_t c = diff->coeffs()[i];
      const int64_t k = constant_divisor(m);
      const Expr* term;
      if (k == 0) {
        term = pool_.mul(pool_.integer(detail::checked_mul(c, scale)), m);
      } else {
        // k*FloorDiv(a, k) = a - Mod(a, k);  k*CeilDiv(a, k) = a + Mod(-a, k).
        const Expr* a = m->arg(0);
        const Expr* kk = pool_.integer(k);
        const Expr* k_times = m->kind() == ExprKind::kFloorDiv
                                  ? pool_.sub(a, pool_.mod(a, kk))
                                  : pool_.add(a, pool_.mod(pool_.neg(a), kk));
        term = pool_.mul(pool_.integer(detail::checked_mul(c, scale / k)), k_times);
      }
      scaled = pool_.add(scaled, term);
    }
    const Expr* r = simplify(pool_.relation(cond->kind(), scaled, pool_.integer(0)));
    if (r->is_bool()) return r->value() != 0;
  } catch (const SymError&) {
    // Overflow while scaling: not decided this way.
  }
  return std::nullopt;
}

void ShapeEnv::check_constraints(const Expr* cond, std::string_view reason,
                                 const std::string& origin) {
  std::vector<const Expr*> syms;
  collect_symbols(cond, syms);
  std::vector<const Expr*> constrained;
  for (const Expr* s : syms)
    if (info(s).user_range) constrained.push_back(s);
  if (constrained.empty()) return;
  // The guard must hold for every value the user allowed: decide it from the ranges at creation.
  const Expr* c;
  {
    FlagScope scope(base_mode_, true);
    invalidate();
    c = simplify(cond);
    invalidate();
  }
  if (c->is_bool() && c->value() != 0) return;
  const Expr* s = constrained[0];
  std::string name = source_name(s);
  std::string guard = describe(cond) + "  (" + std::string(reason) + ", at " + origin + ")";
  auto lin = cond->kind() == ExprKind::kEq ? as_linear(pool_.sub(cond->arg(0), cond->arg(1)))
                                           : std::nullopt;
  if (lin && lin->symbol == s && (lin->coeff == 1 || lin->coeff == -1)) {
    int64_t value = lin->coeff == 1 ? -lin->constant : lin->constant;
    throw ConstraintViolation("[ShapeEnv] constraint violation: " + name +
                              " was marked dynamic with range " + info(s).user_range->to_string() +
                              ", but tracing specialized it to " + std::to_string(value) +
                              " with the guard " + guard);
  }
  throw ConstraintViolation("[ShapeEnv] constraint violation: " + name +
                            " was marked dynamic with range " + info(s).user_range->to_string() +
                            ", but tracing added the guard " + guard +
                            ", which does not hold for every value in that range");
}

void ShapeEnv::record_guard(const Expr* cond, std::string_view reason, const std::string& origin) {
  check_constraints(cond, reason, origin);
  guards_.push_back({cond, std::string(reason), origin});
  guarded_.insert(cond);
  apply_fact(cond, reason);
  if (options_.max_guards_per_symbol <= 0) return;
  std::vector<const Expr*> syms;
  collect_symbols(cond, syms);
  for (const Expr* s : syms) {
    SymbolInfo& i = info(s);
    if (++i.guard_count < options_.max_guards_per_symbol || i.replacement != nullptr) continue;
    // Too many guards on one symbol: every new shape would recompile anyway, so specialize.
    const Expr* eq = pool_.relation(ExprKind::kEq, s, pool_.integer(*i.hint));
    if (eq->is_bool()) continue;
    std::string why = to_string(s) + " reached " + std::to_string(options_.max_guards_per_symbol) +
                      " guards; specialized to " + std::to_string(*i.hint);
    check_constraints(eq, why, origin);
    guards_.push_back({eq, why, origin});
    apply_fact(eq, why);
  }
}

void ShapeEnv::add_replacement(const Expr* symbol, const Expr* target, std::string_view reason) {
  SymbolInfo& s = info(symbol);
  s.replacement = target;
  s.replaced_by = target;
  s.replacement_reason = std::string(reason);
  if (target->is_symbol()) {
    SymbolInfo& t = info(target);
    t.range = t.range.intersect(s.range);
    t.base_range = t.base_range.intersect(s.base_range);
  }
  invalidate();
  for (auto& [x, k] : divisible_) x = simplify(x);
}

void ShapeEnv::apply_fact(const Expr* cond, std::string_view reason) {
  if (!cond->is_relation()) return;
  if (cond->kind() == ExprKind::kEq) {
    apply_equality(cond->arg(0), cond->arg(1), reason);
  } else {
    apply_bound(cond);
  }
}

void ShapeEnv::apply_equality(const Expr* lhs, const Expr* rhs, std::string_view reason) {
  // Mod(x, k) == 0 becomes a divisibility fact.
  for (auto [m, z] : {std::pair{lhs, rhs}, std::pair{rhs, lhs}}) {
    if (m->kind() == ExprKind::kMod && m->arg(1)->is_int() && z->is_int() && z->value() == 0) {
      divisible_.push_back({m->arg(0), m->arg(1)->value()});
      invalidate();
      return;
    }
  }
  // An equality becomes a replacement: solve for a symbol with coefficient +-1 that occurs
  // nowhere else, preferring unbacked symbols, then the latest one (so representatives are the
  // oldest symbols).
  const Expr* diff = pool_.sub(lhs, rhs);
  if (diff->kind() != ExprKind::kAdd && !diff->is_symbol()) return;
  std::vector<std::pair<const Expr*, int64_t>> terms;
  if (diff->is_symbol()) {
    terms.push_back({diff, 1});
  } else {
    for (size_t i = 0; i < diff->args().size(); ++i)
      terms.push_back({diff->arg(i), diff->coeffs()[i]});
  }
  const Expr* best = nullptr;
  int64_t best_coeff = 0;
  for (auto& [m, c] : terms) {
    if (!m->is_symbol() || (c != 1 && c != -1)) continue;
    const Expr* rest = pool_.sub(diff, pool_.mul(pool_.integer(c), m));
    std::vector<const Expr*> syms;
    collect_symbols(rest, syms);
    if (std::find(syms.begin(), syms.end(), m) != syms.end()) continue;
    if (best == nullptr || (m->is_unbacked() && !best->is_unbacked()) ||
        (m->is_unbacked() == best->is_unbacked() && compare(m, best) > 0)) {
      best = m;
      best_coeff = c;
    }
  }
  if (best == nullptr) return;
  // c*s + rest == 0  =>  s = -rest / c.
  const Expr* rest = pool_.sub(diff, pool_.mul(pool_.integer(best_coeff), best));
  add_replacement(best, best_coeff == 1 ? pool_.neg(rest) : rest, reason);
}

void ShapeEnv::apply_bound(const Expr* cond) {
  // A bound on a single symbol narrows its range: a*s + b >= 0 after normalizing.
  auto lin = as_linear(pool_.sub(cond->arg(0), cond->arg(1)));
  if (!lin) return;
  SymbolInfo& s = info(lin->symbol);
  int64_t a = lin->coeff, b = lin->constant;
  ValueRange r = s.range;
  switch (cond->kind()) {
    case ExprKind::kNe: {
      // s != v only narrows when v is an end of the range.
      if (a != 1 && a != -1) return;
      int64_t v = a == 1 ? -b : b;
      if (v == r.lo) r.lo = detail::checked_add(r.lo, 1);
      if (v == r.hi) r.hi = detail::checked_sub(r.hi, 1);
      break;
    }
    case ExprKind::kGt:
      b = detail::checked_sub(b, 1);
      [[fallthrough]];
    case ExprKind::kGe:
      break;
    case ExprKind::kLt:
      b = detail::checked_add(b, 1);
      [[fallthrough]];
    case ExprKind::kLe:
      a = detail::checked_neg(a);
      b = detail::checked_neg(b);
      break;
    default:
      return;
  }
  if (cond->kind() != ExprKind::kNe) {
    // a*s + b >= 0: s >= ceil(-b / a) for a > 0, s <= floor(b / -a) for a < 0.
    if (a > 0) {
      r.lo = std::max(r.lo, detail::checked_ceildiv(detail::checked_neg(b), a));
    } else {
      r.hi = std::min(r.hi, detail::checked_floordiv(b, detail::checked_neg(a)));
    }
  }
  if (r != s.range) {
    s.range = r;
    invalidate();
  }
}

void ShapeEnv::assume(SymBool cond, std::string_view reason, std::source_location loc) {
  if (!cond.is_symbolic()) {
    if (!cond.expect_bool())
      throw SymError("[ShapeEnv] assume(" + std::string(reason) + "): the condition is false");
    return;
  }
  const Expr* e = simplify(cond.expr());
  if (e->is_bool()) {
    if (e->value() == 0)
      throw SymError("[ShapeEnv] assume(" + std::string(reason) + "): " + to_string(cond.expr()) +
                     " is provably false");
    return;
  }
  std::vector<const Expr*> syms;
  collect_symbols(e, syms);
  bool backed = std::all_of(syms.begin(), syms.end(),
                            [&](const Expr* s) { return info(s).hint.has_value(); });
  if (backed && hint_of(e) == 0) {
    throw SymError("[ShapeEnv] assume(" + std::string(reason) + "): " + to_string(e) +
                   " is false for the traced sizes");
  }
  // Over backed sizes the fact must also hold for later calls, so it becomes a checked guard;
  // over data-dependent ones it can only be trusted (a runtime assert is the caller's part).
  if (backed) {
    record_guard(e, reason, origin_of(loc));
  } else {
    apply_fact(e, reason);
  }
}

void ShapeEnv::constrain_range(SymInt symbol, int64_t min, int64_t max) {
  const Expr* e = symbol.is_symbolic() ? simplify(symbol.expr()) : nullptr;
  if (e == nullptr || !e->is_symbol() || !e->is_unbacked()) {
    throw SymError("[ShapeEnv] constrain_range: " + symbol.to_string() +
                   " is not an unbacked symbol; guard on backed sizes with evaluate()");
  }
  SymbolInfo& s = info(e);
  ValueRange r = s.range.intersect({min, max});
  if (r.is_empty()) {
    throw SymError("[ShapeEnv] constrain_range: [" + std::to_string(min) + ", " +
                   std::to_string(max) + "] does not meet the range " + s.range.to_string() +
                   " of " + to_string(e));
  }
  s.range = r;
  s.base_range = s.base_range.intersect({min, max});
  invalidate();
}

std::string ShapeEnv::format_guards() const {
  std::string out;
  for (const Guard& g : guards_) out += to_string(g.condition) + "  # " + g.reason + "\n";
  return out;
}

}  // namespace lathe::sym
