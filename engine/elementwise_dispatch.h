#pragma once
// The functor of each elementwise op (engine/elementwise_ops.h's rows, the
// math of engine/functors.h), for the CPU and CUDA kernels alike: each calls
// run(functor) and returns what it returns.
//
// These are baseline code (a file of cpu/ includes this before its level's
// namespace); `run` is the kernel's own, compiled for its ISA, and is
// called, not inlined, once per kernel launch.

#include <type_traits>

#include "base/error.h"
#include "engine/elementwise_ops.h"
#include "engine/functors.h"

namespace reprise {
namespace fn {
// The Gradient of a row whose op file forms the gradient from other ops.
struct Composed {};
}  // namespace fn

namespace detail {
// F, with the op's scalar parameter in its one member if it has one.
template <class F>
F functor_with(double param) {
  if constexpr (std::is_empty_v<F>) {
    return F{};
  } else {
    return F{param};
  }
}
}  // namespace detail

// Calls run(f) with op's forward functor x -> y.
template <class Run>
auto with_unary(UnaryOp op, double param, Run run) {
  switch (op) {
#define REPRISE_FORWARD(name, Forward, ...) \
  case UnaryOp::name:                       \
    return run(detail::functor_with<fn::Forward>(param));
    REPRISE_UNARY_OPS(REPRISE_FORWARD)
    REPRISE_SCALAR_OPS(REPRISE_FORWARD)
#undef REPRISE_FORWARD
  }
  REPRISE_FAIL("unary: no op numbered ", int(op));
}

// Calls run(f) with op's gradient functor (x, y, dy) -> dx.
template <class Run>
auto with_unary_grad(UnaryOp op, double param, Run run) {
  switch (op) {
#define REPRISE_GRADIENT(name, Forward, Gradient, ...)           \
  case UnaryOp::name:                                            \
    if constexpr (!std::is_same_v<fn::Gradient, fn::Composed>) { \
      return run(detail::functor_with<fn::Gradient>(param));     \
    }                                                            \
    break;
    REPRISE_UNARY_OPS(REPRISE_GRADIENT)
    REPRISE_SCALAR_OPS(REPRISE_GRADIENT)
#undef REPRISE_GRADIENT
  }
  REPRISE_FAIL("unary_backward: ", unary_op_name(op), " has no gradient kernel");
}

// Calls run(f) with op's functor (a, b) -> a op b.
template <class Run>
auto with_binary(BinaryOp op, Run run) {
  switch (op) {
#define REPRISE_BINARY(name, Functor) \
  case BinaryOp::name:                \
    return run(fn::Functor{});
    REPRISE_BINARY_OPS(REPRISE_BINARY)
#undef REPRISE_BINARY
  }
  REPRISE_FAIL("binary: no op numbered ", int(op));
}

// Calls run(f) with op's functor (a, b) -> bool.
template <class Run>
auto with_compare(CompareOp op, Run run) {
  switch (op) {
#define REPRISE_COMPARE(name, Functor, ...) \
  case CompareOp::name:                     \
    return run(fn::Functor{});
    REPRISE_COMPARE_OPS(REPRISE_COMPARE)
#undef REPRISE_COMPARE
  }
  REPRISE_FAIL("compare: no op numbered ", int(op));
}

}  // namespace reprise
