#pragma once
// ShapeEnv: the symbols of one trace, their hints and ranges, and the guards that tracing records.
//
// Used by one tracing thread at a time. Owns every expression it creates (through its ExprPool),
// so SymInts made from it must not outlive it.

#include <cstdint>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lathe/sym/expr.h"
#include "lathe/sym/expr_pool.h"
#include "lathe/sym/guard_program.h"
#include "lathe/sym/source.h"
#include "lathe/sym/sym_int.h"
#include "lathe/sym/value_range.h"

namespace lathe::sym {

// How a dimension becomes a SymInt.
enum class DimPolicy : uint8_t {
  kStatic,   // the hint as a constant (guarded equal to it)
  kDynamic,  // a fresh symbol
  kDuck,     // a symbol shared with every earlier duck-sized dim of the same hint
};

struct ShapeEnvOptions {
  // kDuck dims with equal hints share a symbol. It can add false equalities (two inputs that
  // happen to be equal at trace time), so it can be switched off: kDuck then acts as kDynamic.
  bool duck_sizing = true;
  // Sizes and strides of 0 or 1 stay constants: kernels special-case them (broadcasting, empty).
  bool specialize_zero_one = true;
  // Once a symbol appears in this many guards it is specialized to its hint (0: no limit).
  int max_guards_per_symbol = 8;
};

// A guard recorded while tracing: a relation that held for the hints.
struct Guard {
  const Expr* condition;
  std::string reason;
  std::string origin;  // "file.cpp:123"
};

class ShapeEnv final : private SimplifyContext {
 public:
  explicit ShapeEnv(ShapeEnvOptions options = {});
  ~ShapeEnv() override;
  ShapeEnv(const ShapeEnv&) = delete;
  ShapeEnv& operator=(const ShapeEnv&) = delete;

  ExprPool& pool() { return pool_; }
  const ShapeEnvOptions& options() const { return options_; }

  // The SymInt for a size, stride or scalar argument seen with value `hint`. Dynamic sizes and
  // strides get the range [2, inf) (0 and 1 are specialized); dynamic scalars are unbounded.
  SymInt create_symbol(int64_t hint, const Source& source, DimPolicy policy = DimPolicy::kDuck);
  // A data-dependent size (u0, u1, ...) with no hint; `origin` says what produced it.
  SymInt create_unbacked_symbol(std::string_view origin,
                                ValueRange range = ValueRange::at_least(0));
  // User constraint: `source` must stay dynamic over [min, max]. Call before create_symbol for
  // that source. Guards that specialize or narrow it raise ConstraintViolation.
  void mark_dynamic(const Source& source, int64_t min = 2, int64_t max = ValueRange::kPosInf);

  // Decides a condition: statically when ranges, replacements and divisibility facts prove it;
  // else from the hints, recording a guard with the reason and the caller's location.
  bool evaluate(SymBool cond, std::string_view reason,
                std::source_location loc = std::source_location::current());
  // Specializes an integer to its hint, recording the guard `v == hint`.
  int64_t evaluate_int(SymInt v, std::string_view reason,
                       std::source_location loc = std::source_location::current());
  // The value of a condition when provable without a guard, else nullopt.
  std::optional<bool> static_value(SymBool cond);
  // States a fact known to hold. Over data-dependent (unbacked) symbols it refines ranges,
  // replacements and divisibility like a guard but is not in the guard program (the caller
  // asserts it at run time); over backed sizes it is recorded as a guard, so later calls check it.
  void assume(SymBool cond, std::string_view reason,
              std::source_location loc = std::source_location::current());
  // Narrows the range of an unbacked symbol.
  void constrain_range(SymInt symbol, int64_t min, int64_t max);

  // The expression with replacements and current facts applied.
  const Expr* simplify(const Expr* e);
  // Bounds of a value from the symbol ranges.
  ValueRange bound(SymInt v);
  // The trace-time value of an expression; throws for unbacked symbols.
  int64_t hint_of(const Expr* e) const;
  // The current range of a symbol.
  ValueRange range_of(const Expr* symbol) const;
  // When guards made `symbol` a constant: the reason of the guard that fixed it (following
  // equalities with other symbols to the one that was pinned). "" while it is still symbolic.
  std::string specialization_reason(const Expr* symbol);

  const std::vector<Guard>& guards() const { return guards_; }
  // Guards as text, one per line: "s0 > 4  # reason".
  std::string format_guards() const;

  // The guard program over the given sources (in binding order); with no argument, over every
  // source registered through create_symbol, in creation order.
  GuardProgram produce_guards(std::span<const Source> sources);
  GuardProgram produce_guards();

 private:
  struct SymbolInfo {
    const Expr* expr = nullptr;
    std::optional<int64_t> hint;
    ValueRange range;       // current: narrowed by guards
    ValueRange base_range;  // at creation (and user constraints); what the program checks
    std::string range_reason;
    std::optional<ValueRange> user_range;  // from mark_dynamic
    std::string origin;                    // unbacked symbols: what produced them
    int first_source = -1;
    int guard_count = 0;
    const Expr* replacement = nullptr;
    const Expr* replaced_by = nullptr;  // the replacement as first learned (no path compression)
    std::string replacement_reason;
  };
  struct SourceEntry {
    Source source;
    const Expr* expr;     // as created: a constant or a symbol
    std::string reason;   // why this source is bound/checked as it is
    bool shared = false;  // duck sized onto an earlier source's symbol
  };

  ValueRange symbol_range(const Expr* symbol) const override;
  bool known_divisible(const Expr* e, int64_t k) const override;

  SymbolInfo& info(const Expr* symbol) { return symbols_[symbol->value()]; }
  const SymbolInfo& info(const Expr* symbol) const { return symbols_[symbol->value()]; }
  const Expr* new_symbol(std::optional<int64_t> hint, ValueRange range, bool unbacked);
  void invalidate();
  void record_guard(const Expr* cond, std::string_view reason, const std::string& origin);
  void apply_fact(const Expr* cond, std::string_view reason);
  // apply_fact of lhs == rhs: a divisibility fact (Mod(x, k) == 0) or a replacement of a symbol.
  void apply_equality(const Expr* lhs, const Expr* rhs, std::string_view reason);
  // apply_fact of a bound (!=, <, <=, >, >=) on one symbol: narrows its range.
  void apply_bound(const Expr* cond);
  void add_replacement(const Expr* symbol, const Expr* target, std::string_view reason);
  void check_constraints(const Expr* cond, std::string_view reason, const std::string& origin);
  void check_backed(const Expr* cond, std::string_view reason, const std::string& origin);
  // The value of a condition that an earlier guard already decides (the same relation, flipped
  // or negated), else nullopt: asking twice records one guard.
  std::optional<bool> decided_by_guards(const Expr* cond);
  // Decides `lhs R rhs` by scaling with the divisors of its FloorDiv / CeilDiv terms (constant
  // k > 0) and writing k*FloorDiv(a, k) as a - Mod(a, k) and k*CeilDiv(a, k) as a + Mod(-a, k),
  // whose residues have bounded ranges (so `2*FloorDiv(s0, 3) <= s0` is proved). Exact, so sound.
  std::optional<bool> decide_by_division(const Expr* cond);
  std::string source_name(const Expr* symbol) const;
  std::string describe(const Expr* e) const;  // with sources for symbols

  // produce_guards, step by step: the entries of the sources; one bind per symbol (its first
  // source); checks of the other sources (constant, same as another, an expression); the
  // recorded guards; the ranges at creation the program must check.
  struct GuardBinders {
    std::unordered_map<const Expr*, Source> source;  // symbol -> the source binding it
    std::vector<const Expr*> order;                  // symbols in binding order
    std::vector<bool> is_binder;                     // per entry
    Source source_of(const Expr* sym) const;         // throws for an unbound symbol
  };
  std::vector<const SourceEntry*> source_entries(std::span<const Source> sources) const;
  GuardBinders emit_binds(const std::vector<const SourceEntry*>& entries, GuardProgram& program);
  void emit_source_checks(const std::vector<const SourceEntry*>& entries, const GuardBinders& b,
                          GuardProgram& program);
  void emit_conditions(const GuardBinders& b, GuardProgram& program);
  void emit_ranges(const std::vector<const SourceEntry*>& entries, const GuardBinders& b,
                   GuardProgram& program);

  ShapeEnvOptions options_;
  ExprPool pool_;
  std::vector<SymbolInfo> symbols_;
  int64_t backed_count_ = 0;
  int64_t unbacked_count_ = 0;
  std::vector<SourceEntry> sources_;
  std::unordered_map<uint64_t, int> source_index_;
  std::unordered_map<uint64_t, ValueRange> constraints_;
  std::unordered_map<int64_t, const Expr*> duck_;  // hint -> symbol
  std::vector<Guard> guards_;
  std::unordered_set<const Expr*> guarded_;                 // the recorded conditions, as recorded
  std::vector<std::pair<const Expr*, int64_t>> divisible_;  // e % k == 0
  std::unordered_map<const Expr*, const Expr*> simplified_;
  bool base_mode_ = false;  // ranges at creation, no facts: "provable from the ranges alone"
};

}  // namespace lathe::sym
