#pragma once
// GuardProgram: a flat list of checks over a call's inputs, produced by ShapeEnv::produce_guards.
// check() runs it without allocating and is safe to call from many threads at once.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "lathe/sym/expr.h"
#include "lathe/sym/source.h"
#include "lathe/sym/value_range.h"

namespace lathe::sym {

// One input slot of a call as guards see it: a tensor's sizes and strides, or an int64 scalar.
// The caller builds these on its stack; the program only reads them during check().
struct ArgView {
  const int64_t* sizes = nullptr;
  const int64_t* strides = nullptr;
  int64_t rank = -1;  // -1: a scalar argument, read from `scalar`
  int64_t scalar = 0;

  static ArgView tensor(const int64_t* sizes, const int64_t* strides, int64_t rank) {
    return {sizes, strides, rank, 0};
  }
  static ArgView integer(int64_t v) { return {nullptr, nullptr, -1, v}; }
};

// The outcome of check(): pass, or the index of the first failing instruction.
struct GuardCheck {
  int32_t failed = -1;
  bool ok() const { return failed < 0; }
  explicit operator bool() const { return ok(); }
};

class GuardProgram {
 public:
  // The printable side of one instruction.
  struct Instruction {
    std::string text;    // in terms of sources: "arg0.size(0) % 8 == 0"
    std::string reason;  // why it exists: "[reshape] -1 dim divides numel"
    std::string origin;  // where the guard was recorded ("shape_env_test.cpp:42"), may be empty
  };

  // Runs every instruction in order. Reading a missing argument or dim, a scalar where a tensor
  // is expected (or the reverse), overflow and division by zero fail the instruction.
  GuardCheck check(std::span<const ArgView> inputs) const noexcept;

  size_t size() const { return code_.size(); }
  const Instruction& instruction(size_t i) const { return info_[i]; }
  // One line per instruction: "<text>  # <reason>"; with origins, " (at <origin>)" is appended.
  std::string to_string(bool with_origins = false) const;
  // A recompile explanation: the failed instruction, its reason and the actual values it read,
  // e.g. "arg0.size(0) > 4  # [test] big enough; actual: arg0.size(0) = 3".
  std::string explain(std::span<const ArgView> inputs, GuardCheck result) const;

  // Building, used by ShapeEnv::produce_guards. `source_of` maps each symbol of an expression to
  // the source that binds it.
  using SourceOf = std::function<Source(const Expr* symbol)>;
  void add_bind(const std::string& symbol, const Source& source, std::string reason);
  void add_equal_sources(const Source& a, const Source& b, std::string reason);
  void add_equal_constant(const Source& a, int64_t value, std::string reason);
  void add_range(const Source& a, ValueRange range, std::string reason);
  // a == e, with e's symbols read from their binding sources.
  void add_equal_expr(const Source& a, const Expr* e, const SourceOf& source_of,
                      std::string reason);
  // A relation over the binding sources of its symbols.
  void add_condition(const Expr* rel, const SourceOf& source_of, std::string reason,
                     std::string origin);

 private:
  enum class Op : uint8_t {
    kBind,         // the source can be read
    kEqSources,    // a == b
    kEqConst,      // a == lo
    kRange,        // lo <= a <= hi
    kCmpConst,     // a <rel> lo
    kModEqConst,   // a % lo == hi
    kMaskEqConst,  // a & lo == hi: a % 2^k for a power-of-two divisor, without a division
    kExpr,         // postfix nodes [lhs, rhs) push two values: first <rel> second
  };
  struct Ref {  // a compiled Source
    int32_t arg = 0;
    int32_t dim = 0;
    Source::Kind kind = Source::Kind::kSize;
  };
  struct Code {
    Op op = Op::kBind;
    ExprKind rel = ExprKind::kEq;
    Ref a, b;
    int64_t lo = 0, hi = 0;
    int32_t lhs = -1, rhs = -1;
  };
  enum class NodeOp : uint8_t {
    kConst,
    kSource,
    kAdd,
    kMul,
    kFloorDiv,
    kCeilDiv,
    kMod,
    kMin,
    kMax,
    kAndMask,    // a % 2^k as a & (2^k - 1): Python's % for a positive power of two
    kShiftRight  // a // 2^k as a >> k: Python's // for a positive power of two
  };
  // One postfix step: kConst and kSource push a value, the others pop two and push one.
  struct Node {
    NodeOp op = NodeOp::kConst;
    Ref src;
    int64_t value = 0;
  };
  // Postfix expressions evaluate on a fixed stack inside check(), so their depth is bounded.
  static constexpr int kMaxStack = 64;

  static Ref ref(const Source& s) { return {s.arg(), s.dim(), s.kind()}; }
  static Code make_code(Op op, ExprKind rel) {
    Code c;
    c.op = op;
    c.rel = rel;
    return c;
  }
  static Code make_code(Op op, ExprKind rel, Ref a) {
    Code c = make_code(op, rel);
    c.a = a;
    return c;
  }
  static Code make_code(Op op, ExprKind rel, Ref a, Ref b) {
    Code c = make_code(op, rel, a);
    c.b = b;
    return c;
  }
  static Node make_node(NodeOp op) {
    Node n;
    n.op = op;
    return n;
  }
  // Appends e in postfix; returns the stack depth it needs.
  int compile(const Expr* e, const SourceOf& source_of);
  void push(Node n) { nodes_.push_back(n); }
  void push_op(NodeOp op) { nodes_.push_back(make_node(op)); }
  bool eval(const Code& c, std::span<const ArgView> inputs, int64_t* x, int64_t* y) const noexcept;
  void finish_expr(Code& c, int depth, const std::string& text);
  void add(Code c, std::string text, std::string reason, std::string origin = {});
  void note_read(const Source& s);

  std::vector<Code> code_;
  std::vector<Node> nodes_;
  std::vector<Instruction> info_;
  // The sources each instruction reads, for explain(); filled while building.
  std::vector<std::vector<Source>> reads_;
  std::vector<Source> pending_reads_;
};

}  // namespace lathe::sym
