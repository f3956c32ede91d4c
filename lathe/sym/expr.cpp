#include "lathe/sym/expr.h"

#include <algorithm>
#include <ostream>
#include <sstream>

#include "lathe/sym/int_math.h"
#include "lathe/sym/sym_error.h"

namespace lathe::sym {
namespace {

// Precedence of the printed form, for parentheses: sums < products < atoms.
constexpr int kPrecSum = 1;
constexpr int kPrecProduct = 2;
constexpr int kPrecAtom = 3;

int kind_rank(ExprKind k) {
  switch (k) {
    case ExprKind::kInt:
      return 0;
    case ExprKind::kBool:
      return 1;
    case ExprKind::kSymbol:
      return 2;
    case ExprKind::kFloorDiv:
      return 3;
    case ExprKind::kCeilDiv:
      return 4;
    case ExprKind::kMod:
      return 5;
    case ExprKind::kMin:
      return 6;
    case ExprKind::kMax:
      return 7;
    case ExprKind::kMul:
      return 8;
    case ExprKind::kAdd:
      return 9;
    default:
      return 10 + static_cast<int>(k);
  }
}

// |v| without overflow, for printing coefficients.
uint64_t magnitude(int64_t v) {
  return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
}

class Printer {
 public:
  Printer(std::ostream& os, const PrintOptions& o) : os_(os), o_(o) {}

  void print(const Expr* e, int parent_prec) {
    switch (e->kind()) {
      case ExprKind::kInt:
        if (e->value() < 0 && parent_prec >= kPrecProduct) {
          os_ << '(' << e->value() << ')';
        } else {
          os_ << e->value();
        }
        return;
      case ExprKind::kBool:
        os_ << (e->value() ? "True" : "False");
        return;
      case ExprKind::kSymbol:
        if (o_.symbol_namer) {
          o_.symbol_namer(os_, e);
        } else {
          os_ << (e->is_unbacked() ? 'u' : 's') << e->display_index();
        }
        return;
      case ExprKind::kAdd:
        return print_add(e, parent_prec);
      case ExprKind::kMul:
        return print_mul(e, parent_prec);
      case ExprKind::kFloorDiv:
      case ExprKind::kMod:
        if (o_.style == PrintOptions::Style::kPython) {
          return print_infix(e, e->kind() == ExprKind::kMod ? " % " : " // ", parent_prec);
        }
        return print_call(e);
      case ExprKind::kCeilDiv:
      case ExprKind::kMin:
      case ExprKind::kMax:
        return print_call(e);
      default:
        print(e->arg(0), 0);
        os_ << ' ' << relation_symbol(e->kind()) << ' ';
        print(e->arg(1), 0);
        return;
    }
  }

 private:
  void print_add(const Expr* e, int parent_prec) {
    bool paren = parent_prec > kPrecSum;
    if (paren) os_ << '(';
    for (size_t i = 0; i < e->args().size(); ++i) {
      int64_t c = e->coeffs()[i];
      if (i == 0) {
        if (c < 0) os_ << '-';
      } else {
        os_ << (c < 0 ? " - " : " + ");
      }
      if (magnitude(c) != 1) {
        os_ << magnitude(c) << '*';
        print(e->arg(i), kPrecProduct);
      } else {
        // A leading unary minus binds tighter than // in Python: -(a // b) needs parentheses.
        print(e->arg(i), (c < 0 && i == 0) ? kPrecProduct : kPrecSum);
      }
    }
    if (e->value() != 0) os_ << (e->value() < 0 ? " - " : " + ") << magnitude(e->value());
    if (paren) os_ << ')';
  }

  void print_mul(const Expr* e, int parent_prec) {
    bool paren = parent_prec > kPrecProduct;
    if (paren) os_ << '(';
    for (size_t i = 0; i < e->args().size(); ++i) {
      if (i > 0) os_ << '*';
      print(e->arg(i), kPrecAtom);
      if (e->coeffs()[i] != 1) os_ << "**" << e->coeffs()[i];
    }
    if (paren) os_ << ')';
  }

  void print_infix(const Expr* e, const char* op, int parent_prec) {
    bool paren = parent_prec >= kPrecProduct;
    if (paren) os_ << '(';
    print(e->arg(0), kPrecProduct);
    os_ << op;
    print(e->arg(1), kPrecAtom);
    if (paren) os_ << ')';
  }

  void print_call(const Expr* e) {
    static const char* names[] = {"FloorDiv", "CeilDiv", "Mod", "Min", "Max"};
    os_ << names[static_cast<int>(e->kind()) - static_cast<int>(ExprKind::kFloorDiv)] << '(';
    for (size_t i = 0; i < e->args().size(); ++i) {
      if (i > 0) os_ << ", ";
      print(e->arg(i), 0);
    }
    os_ << ')';
  }

  std::ostream& os_;
  const PrintOptions& o_;
};

}  // namespace

void print(std::ostream& os, const Expr* e, const PrintOptions& options) {
  Printer(os, options).print(e, 0);
}

std::string to_string(const Expr* e, const PrintOptions& options) {
  std::ostringstream os;
  print(os, e, options);
  return os.str();
}

int compare(const Expr* a, const Expr* b) {
  if (a == b) return 0;
  int ra = kind_rank(a->kind()), rb = kind_rank(b->kind());
  if (ra != rb) return ra < rb ? -1 : 1;
  if (a->is_symbol()) {
    if (a->is_unbacked() != b->is_unbacked()) return a->is_unbacked() ? 1 : -1;
    if (a->display_index() != b->display_index())
      return a->display_index() < b->display_index() ? -1 : 1;
  }
  size_t n = std::min(a->args().size(), b->args().size());
  for (size_t i = 0; i < n; ++i) {
    int c = compare(a->arg(i), b->arg(i));
    if (c != 0) return c;
  }
  if (a->args().size() != b->args().size()) return a->args().size() < b->args().size() ? -1 : 1;
  n = std::min(a->coeffs().size(), b->coeffs().size());
  for (size_t i = 0; i < n; ++i) {
    if (a->coeffs()[i] != b->coeffs()[i]) return a->coeffs()[i] < b->coeffs()[i] ? -1 : 1;
  }
  if (a->coeffs().size() != b->coeffs().size())
    return a->coeffs().size() < b->coeffs().size() ? -1 : 1;
  if (a->value() != b->value()) return a->value() < b->value() ? -1 : 1;
  // Distinct interned nodes always differ above (e.g. symbols differ in display index).
  return a < b ? -1 : 1;
}

int64_t degree(const Expr* m) {
  if (m->is_int()) return 0;
  if (m->kind() != ExprKind::kMul) return 1;
  int64_t d = 0;
  for (int64_t e : m->coeffs()) d += e;
  return d;
}

int64_t evaluate(const Expr* e, std::span<const int64_t> values) {
  using namespace detail;
  switch (e->kind()) {
    case ExprKind::kInt:
    case ExprKind::kBool:
      return e->value();
    case ExprKind::kSymbol: {
      if (e->value() < 0 || static_cast<size_t>(e->value()) >= values.size()) {
        throw SymError("[sym] evaluate: no value given for symbol " + to_string(e));
      }
      return values[e->value()];
    }
    case ExprKind::kAdd: {
      int64_t r = e->value();
      for (size_t i = 0; i < e->args().size(); ++i)
        r = checked_add(r, checked_mul(e->coeffs()[i], evaluate(e->arg(i), values)));
      return r;
    }
    case ExprKind::kMul: {
      int64_t r = 1;
      for (size_t i = 0; i < e->args().size(); ++i)
        r = checked_mul(r, checked_pow(evaluate(e->arg(i), values), e->coeffs()[i]));
      return r;
    }
    case ExprKind::kFloorDiv:
      return checked_floordiv(evaluate(e->arg(0), values), evaluate(e->arg(1), values));
    case ExprKind::kCeilDiv:
      return checked_ceildiv(evaluate(e->arg(0), values), evaluate(e->arg(1), values));
    case ExprKind::kMod:
      return checked_mod(evaluate(e->arg(0), values), evaluate(e->arg(1), values));
    case ExprKind::kMin:
    case ExprKind::kMax: {
      int64_t r = evaluate(e->arg(0), values);
      for (size_t i = 1; i < e->args().size(); ++i) {
        int64_t v = evaluate(e->arg(i), values);
        r = e->kind() == ExprKind::kMin ? std::min(r, v) : std::max(r, v);
      }
      return r;
    }
    default: {
      int64_t l = evaluate(e->arg(0), values), r = evaluate(e->arg(1), values);
      switch (e->kind()) {
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
  }
}

void collect_symbols(const Expr* e, std::vector<const Expr*>& out) {
  if (e->is_symbol()) {
    if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
    return;
  }
  for (const Expr* a : e->args()) collect_symbols(a, out);
}

ExprKind negate_relation(ExprKind k) {
  switch (k) {
    case ExprKind::kEq:
      return ExprKind::kNe;
    case ExprKind::kNe:
      return ExprKind::kEq;
    case ExprKind::kLt:
      return ExprKind::kGe;
    case ExprKind::kGe:
      return ExprKind::kLt;
    case ExprKind::kLe:
      return ExprKind::kGt;
    case ExprKind::kGt:
      return ExprKind::kLe;
    default:
      throw SymError("[sym] negate_relation: not a relation");
  }
}

const char* relation_symbol(ExprKind k) {
  switch (k) {
    case ExprKind::kEq:
      return "==";
    case ExprKind::kNe:
      return "!=";
    case ExprKind::kLt:
      return "<";
    case ExprKind::kLe:
      return "<=";
    case ExprKind::kGt:
      return ">";
    case ExprKind::kGe:
      return ">=";
    default:
      return "?";
  }
}

}  // namespace lathe::sym
