// ShapeEnv::produce_guards: the environment's facts as a guard program over a call's inputs
// (bind each symbol from its first source, check the other sources, ranges and guards).
#include <algorithm>
#include <numeric>
#include <sstream>

#include "lathe/sym/flag_scope.h"
#include "lathe/sym/int_math.h"
#include "lathe/sym/shape_env.h"
#include "lathe/sym/sym_error.h"

namespace lathe::sym {

GuardProgram ShapeEnv::produce_guards() {
  std::vector<Source> all;
  for (const SourceEntry& s : sources_) all.push_back(s.source);
  return produce_guards(all);
}

GuardProgram ShapeEnv::produce_guards(std::span<const Source> sources) {
  std::vector<const SourceEntry*> entries = source_entries(sources);
  // Simplify with replacements but only the ranges at creation: a guard is dropped only when
  // those ranges alone prove it, since the program checks exactly them.
  FlagScope scope(base_mode_, true);
  invalidate();
  struct Cleanup {
    ShapeEnv* env;
    ~Cleanup() { env->invalidate(); }
  } cleanup{this};

  GuardProgram program;
  GuardBinders binders = emit_binds(entries, program);
  emit_source_checks(entries, binders, program);
  emit_conditions(binders, program);
  emit_ranges(entries, binders, program);
  return program;
}

Source ShapeEnv::GuardBinders::source_of(const Expr* sym) const {
  auto it = source.find(sym);
  if (it == source.end()) {
    throw SymError("[ShapeEnv] produce_guards: " + to_string(sym) +
                   " is not bound by any of the given sources");
  }
  return it->second;
}

std::vector<const ShapeEnv::SourceEntry*> ShapeEnv::source_entries(
    std::span<const Source> sources) const {
  std::vector<const SourceEntry*> entries;
  for (const Source& src : sources) {
    auto it = source_index_.find(src.key());
    if (it == source_index_.end()) {
      throw SymError("[ShapeEnv] produce_guards: " + src.to_string() +
                     " has no symbol in this ShapeEnv (create_symbol was never called for it)");
    }
    entries.push_back(&sources_[it->second]);
  }
  return entries;
}

ShapeEnv::GuardBinders ShapeEnv::emit_binds(const std::vector<const SourceEntry*>& entries,
                                            GuardProgram& program) {
  GuardBinders b;
  b.is_binder.assign(entries.size(), false);
  for (size_t i = 0; i < entries.size(); ++i) {
    const Expr* e = simplify(entries[i]->expr);
    if (!e->is_symbol() || b.source.count(e)) continue;
    b.source.emplace(e, entries[i]->source);
    b.order.push_back(e);
    b.is_binder[i] = true;
    program.add_bind(to_string(e), entries[i]->source, entries[i]->reason);
  }
  return b;
}

void ShapeEnv::emit_source_checks(const std::vector<const SourceEntry*>& entries,
                                  const GuardBinders& b, GuardProgram& program) {
  auto source_of = [&](const Expr* sym) { return b.source_of(sym); };
  for (size_t i = 0; i < entries.size(); ++i) {
    if (b.is_binder[i]) continue;
    const SourceEntry& entry = *entries[i];
    const Expr* e = simplify(entry.expr);
    std::string reason = entry.reason;
    if (entry.expr->is_symbol() && !entry.shared && info(entry.expr).replacement != nullptr)
      reason = info(entry.expr).replacement_reason;
    if (e->is_int()) {
      program.add_equal_constant(entry.source, e->value(), reason);
    } else if (e->is_symbol()) {
      program.add_equal_sources(entry.source, source_of(e), reason);
    } else {
      program.add_equal_expr(entry.source, e, source_of, reason);
    }
  }
}

void ShapeEnv::emit_conditions(const GuardBinders& b, GuardProgram& program) {
  auto source_of = [&](const Expr* sym) { return b.source_of(sym); };
  std::vector<const Expr*> emitted;
  for (const Guard& g : guards_) {
    const Expr* c = simplify(g.condition);
    if (c->is_bool()) {
      if (c->value() != 0) continue;
      throw SymError("[ShapeEnv] produce_guards: the guard " + to_string(g.condition) + " (" +
                     g.reason + ") is false for the ranges at creation");
    }
    if (std::find(emitted.begin(), emitted.end(), c) != emitted.end()) continue;
    emitted.push_back(c);
    program.add_condition(c, source_of, g.reason, g.origin);
  }
}

void ShapeEnv::emit_ranges(const std::vector<const SourceEntry*>& entries, const GuardBinders& b,
                           GuardProgram& program) {
  // Ranges: of every bound symbol, and of replaced symbols whose value is an expression (their
  // own source's check does not imply their range).
  auto natural = [](const Source& s) {
    return s.kind() == Source::Kind::kScalar ? ValueRange::unknown() : ValueRange::at_least(0);
  };
  auto emit_range = [&](const Expr* sym, const Source& src) {
    ValueRange r = info(sym).base_range;
    ValueRange n = natural(src);
    if (r.lo <= n.lo) r.lo = ValueRange::kNegInf;
    if (r.hi >= n.hi) r.hi = ValueRange::kPosInf;
    if (r.lo == ValueRange::kNegInf && r.hi == ValueRange::kPosInf) return;
    program.add_range(src, r, info(sym).range_reason);
  };
  for (const Expr* sym : b.order) emit_range(sym, b.source.at(sym));
  for (const SourceEntry* entry : entries) {
    const Expr* sym = entry->expr;
    if (!sym->is_symbol() || entry->shared || b.source.count(sym)) continue;
    const Expr* e = simplify(sym);
    if (e->is_int() || e->is_symbol()) continue;
    emit_range(sym, entry->source);
  }
}

}  // namespace lathe::sym
