#include "lathe/trace/verify.h"

#include <cmath>
#include <optional>

#include "lathe/core/random.h"

namespace lathe::detail {

namespace {

// Why `got` (compiled) differs from `want` (eager), or nothing.
std::optional<std::string> difference(const Tensor& got, const Tensor& want, double rtol,
                                      double atol) {
  if (got.defined() != want.defined())
    return str("compiled ", got.defined() ? got.shape_string() : "undefined", ", eager ",
               want.defined() ? want.shape_string() : "undefined");
  if (!got.defined()) return std::nullopt;
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return str("compiled ", got.shape_string(), ", eager ", want.shape_string());
  std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  size_t worst = 0;
  double worst_excess = 0;
  bool bad = false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    double d = std::fabs(a[i] - b[i]);
    double excess = d - (atol + rtol * std::fabs(b[i]));
    if (std::isnan(d) || (std::isinf(d) && a[i] != b[i])) excess = INFINITY;
    if (excess > 0 && (!bad || excess > worst_excess)) {
      bad = true;
      worst = i;
      worst_excess = excess;
    }
  }
  if (!bad) return std::nullopt;
  return str(got.shape_string(), ", largest difference at element ", worst, ": compiled ", a[worst],
             ", eager ", b[worst], " (tolerance ", atol, " + ", rtol, " * |eager|)");
}

}  // namespace

int verify_call_count(const CompileOptions& options) {
  if (options.verify) return options.verify_calls;
  const CompileOptions process = default_compile_options();
  return process.verify ? process.verify_calls : 0;
}

std::vector<Tensor> verified_call(const CompileOptions& options, const std::string& call,
                                  const std::vector<std::pair<std::string, Tensor>>& written,
                                  const std::function<std::vector<Tensor>()>& compiled,
                                  const std::function<std::vector<Tensor>()>& eager) {
  std::vector<Tensor> before;
  before.reserve(written.size());
  for (const auto& [name, t] : written) before.push_back(t.clone());
  Generator::State rng = default_generator().state();

  // The eager reference first: the compiled call runs last, so that nothing is written after it
  // records its autograd node (a training step's backward checks the versions it saved).
  std::vector<Tensor> want;
  for (const Tensor& o : eager()) want.push_back(o.defined() ? o.clone() : Tensor());
  std::vector<Tensor> eager_written;
  eager_written.reserve(written.size());
  for (const auto& [name, t] : written) eager_written.push_back(t.clone());
  // Only what eager changed is restored: a copy bumps the version of a tensor that another
  // autograd graph may have saved (an argument both a compiled and an eager step read).
  for (size_t i = 0; i < written.size(); ++i)
    if (difference(eager_written[i], before[i], 0, 0)) Tensor(written[i].second).copy_(before[i]);
  default_generator().set_state(rng);
  std::vector<Tensor> outs = compiled();

  auto fail = [&](const std::string& what, const std::string& why) {
    // The compiled call is wrong: leave the state eager's.
    for (size_t i = 0; i < written.size(); ++i)
      if (difference(written[i].second, eager_written[i], 0, 0))
        Tensor(written[i].second).copy_(eager_written[i]);
    throw Error(str("[compile.verify] '", options.name, "' ", call, ": ", what,
                    " differs from eager: ", why,
                    ". The compiled function replayed a stale trace: it depends on something the "
                    "guards do not see, such as a host value captured by the lambda (a number, a "
                    "flag, a tensor variable rebound after tracing) or module state that is not a "
                    "parameter, buffer, child or training flag. Pass such values as arguments (a "
                    "scalar Arg is guarded by value), or create a new compiled function when "
                    "they change"));
  };
  if (want.size() != outs.size())
    fail("the number of outputs", str("compiled ", outs.size(), ", eager ", want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    if (auto why = difference(outs[i], want[i], options.verify_rtol, options.verify_atol))
      fail(str("output ", i), *why);
  for (size_t i = 0; i < written.size(); ++i)
    if (auto why = difference(written[i].second, eager_written[i], options.verify_rtol,
                              options.verify_atol))
      fail(written[i].first + " (written in place by the call)", *why);
  return outs;
}

}  // namespace lathe::detail
