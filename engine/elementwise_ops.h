#pragma once
// The elementwise ops, one row each. Everything else about an op is made
// from its row: the UnaryOp and BinaryOp enums and their names (below), the
// functor each backend runs (engine/elementwise_dispatch.h), the registry
// entries (ops/registry.cpp), the ops:: functions of x alone (ops/unary.h),
// their Python bindings (python/src/ops.cpp), and the op case in
// tests/cases/elementwise.cpp (gradient check, CPU capabilities, CUDA
// simulator and device, bench/ops/ops.cpp beside bench/ops/ops_torch.py).
// Adding an op is a functor pair in engine/functors.h and a row here.
//
// A row is X(name, Forward, Gradient, reads, lo, hi, doc):
//   name      the enum value, the registered op's name and the ops:: function;
//   Forward   the engine/functors.h functor x -> y;
//   Gradient  its functor (x, y, dy) -> dx, or Composed when the op file
//             forms the gradient from other ops;
//   reads     what the gradient reads, so all the op saves: input (x),
//             output (y) or nothing;
//   lo, hi    an interval where the op is smooth, which tests and benchmarks
//             draw their inputs from;
//   doc       a line for the Python docstring.
// A functor with a member takes the op's scalar parameter (pow's exponent,
// add_scalar's and mul_scalar's scalar) into it; the others have none.
//
// This file is preprocessor rows and two enums, so every layer can include
// it, cpu/ and cuda/ kernels included.

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

// Functions of x alone: ops::name(x) (ops/unary.h).
#define REPRISE_UNARY_OPS(X)                                                                  \
  X(neg, Neg, NegGrad, nothing, -2, 2, "-x")                                                  \
  X(exp, Exp, ExpGrad, output, -2, 2, "e ** x")                                               \
  X(log, Log, LogGrad, input, 0.2, 3, "the natural logarithm")                                \
  X(sqrt, Sqrt, SqrtGrad, output, 0.2, 3, "")                                                 \
  X(rsqrt, Rsqrt, RsqrtGrad, output, 0.2, 3, "1 / sqrt(x)")                                   \
  X(relu, Relu, ReluGrad, input, -2, 2, "max(x, 0)")                                          \
  X(gelu, GeluTanh, GeluTanhGrad, input, -3, 3, "GELU, tanh approximation")                   \
  X(silu, Silu, SiluGrad, input, -4, 4, "x * sigmoid(x)")                                     \
  X(sigmoid, Sigmoid, SigmoidGrad, output, -4, 4, "1 / (1 + e ** -x)")                        \
  X(tanh, Tanh, TanhGrad, output, -2, 2, "")                                                  \
  X(softplus, Softplus, SoftplusGrad, input, -4, 4, "log(1 + e ** x); x itself above x = 20") \
  X(abs, Abs, AbsGrad, input, -2, 2, "|x|; its gradient is 0 at 0, as torch's")               \
  X(sign, Sign, Zero, nothing, -2, 2, "-1, 0 or 1 (NaN for NaN); its gradient is 0")          \
  X(square, Square, SquareGrad, input, -2, 2, "x * x")                                        \
  X(reciprocal, Reciprocal, ReciprocalGrad, output, 0.2, 3, "1 / x")                          \
  X(sin, Sin, SinGrad, input, -3, 3, "")                                                      \
  X(cos, Cos, CosGrad, input, -3, 3, "")                                                      \
  X(erf, Erf, ErfGrad, input, -2, 2, "the error function")                                    \
  X(log1p, Log1p, Log1pGrad, input, -0.5, 2, "log(1 + x), exact for small x")                 \
  X(expm1, Expm1, Expm1Grad, output, -2, 2, "e ** x - 1, exact for small x")                  \
  X(gelu_erf, GeluErf, GeluErfGrad, input, -3, 3, "GELU, exact: x Phi(x) with erf")           \
  X(logsigmoid, LogSigmoid, LogSigmoidGrad, input, -4, 4, "log(sigmoid(x)), without overflow")

// With a scalar parameter, recorded by their own op files: ops::pow(x, e)
// (ops/unary.h), ops::add(x, s) and ops::mul(x, s) (ops/binary.h).
#define REPRISE_SCALAR_OPS(X)                                 \
  X(pow, PowScalar, PowScalarGrad, input, 0.2, 2, "x ** e")   \
  X(add_scalar, AddScalar, Composed, nothing, -2, 2, "x + s") \
  X(mul_scalar, MulScalar, Composed, nothing, -2, 2, "x * s")

// a op b, broadcast by the op file (ops/binary.h): X(name, Functor).
#define REPRISE_BINARY_OPS(X) \
  X(add, Add) X(sub, Sub) X(mul, Mul) X(div, Div) X(maximum, Maximum) X(minimum, Minimum)

// Comparisons, a op b -> bool, broadcast by the op file (ops/compare.h):
// X(name, Functor, operator). IEEE's: every comparison with a NaN is false
// but ne.
#define REPRISE_COMPARE_OPS(X) \
  X(eq, Eq, ==) X(ne, Ne, !=) X(lt, Lt, <) X(le, Le, <=) X(gt, Gt, >) X(ge, Ge, >=)

namespace reprise {

#define REPRISE_ENUM_VALUE(name, ...) name,
enum class UnaryOp : uint8_t {
  REPRISE_UNARY_OPS(REPRISE_ENUM_VALUE) REPRISE_SCALAR_OPS(REPRISE_ENUM_VALUE)
};
enum class BinaryOp : uint8_t { REPRISE_BINARY_OPS(REPRISE_ENUM_VALUE) };
enum class CompareOp : uint8_t { REPRISE_COMPARE_OPS(REPRISE_ENUM_VALUE) };
#undef REPRISE_ENUM_VALUE

// What a unary op's gradient reads, and so what the op saves.
enum class GradReads : uint8_t { input, output, nothing };

// The unary rows as data, in enum order, for the op files, tests,
// benchmarks and bindings.
struct UnaryOpRow {
  UnaryOp op;
  const char* name;
  bool takes_scalar;         // a row of REPRISE_SCALAR_OPS
  bool has_gradient_kernel;  // its Gradient is a functor, not Composed
  GradReads reads;
  double lo, hi;
  const char* doc;
};

#define REPRISE_ROW(takes_scalar, name, Forward, Gradient, reads, lo, hi, doc)                 \
  UnaryOpRow{UnaryOp::name,    #name, takes_scalar, std::string_view(#Gradient) != "Composed", \
             GradReads::reads, lo,    hi,           doc},
#define REPRISE_UNARY_ROW(...) REPRISE_ROW(false, __VA_ARGS__)
#define REPRISE_SCALAR_ROW(...) REPRISE_ROW(true, __VA_ARGS__)
inline constexpr UnaryOpRow kUnaryOpRows[] = {REPRISE_UNARY_OPS(REPRISE_UNARY_ROW)
                                                  REPRISE_SCALAR_OPS(REPRISE_SCALAR_ROW)};
#undef REPRISE_SCALAR_ROW
#undef REPRISE_UNARY_ROW
#undef REPRISE_ROW

constexpr const UnaryOpRow& unary_op_row(UnaryOp op) { return kUnaryOpRows[size_t(op)]; }
constexpr const char* unary_op_name(UnaryOp op) {
  return size_t(op) < std::size(kUnaryOpRows) ? kUnaryOpRows[size_t(op)].name : "?";
}

#define REPRISE_BINARY_VALUE(name, Functor) BinaryOp::name,
inline constexpr BinaryOp kBinaryOps[] = {REPRISE_BINARY_OPS(REPRISE_BINARY_VALUE)};
#undef REPRISE_BINARY_VALUE
constexpr const char* binary_op_name(BinaryOp op) {
  constexpr const char* kNames[] = {
#define REPRISE_NAME(name, Functor) #name,
      REPRISE_BINARY_OPS(REPRISE_NAME)
#undef REPRISE_NAME
  };
  return size_t(op) < std::size(kNames) ? kNames[size_t(op)] : "?";
}

#define REPRISE_COMPARE_VALUE(name, ...) CompareOp::name,
inline constexpr CompareOp kCompareOps[] = {REPRISE_COMPARE_OPS(REPRISE_COMPARE_VALUE)};
#undef REPRISE_COMPARE_VALUE
constexpr const char* compare_op_name(CompareOp op) {
  constexpr const char* kNames[] = {
#define REPRISE_NAME(name, ...) #name,
      REPRISE_COMPARE_OPS(REPRISE_NAME)
#undef REPRISE_NAME
  };
  return size_t(op) < std::size(kNames) ? kNames[size_t(op)] : "?";
}

}  // namespace reprise
