// The ops (ops/*.h) as module functions, most of them also Tensor methods,
// and Python's operators. Every op records on the tape as it does in C++,
// and its errors (dtypes, shapes, devices) are reprise.Error.

#include <nanobind/stl/pair.h>
#include <nanobind/stl/variant.h>

#include <cmath>
#include <optional>
#include <utility>
#include <variant>

#include "ops/attention.h"
#include "ops/binary.h"
#include "ops/cast.h"
#include "ops/clamp.h"
#include "ops/compare.h"
#include "ops/delta_rule.h"
#include "ops/einsum.h"
#include "ops/embedding.h"
#include "ops/grouped_linear.h"
#include "ops/indexing.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/moe_route.h"
#include "ops/norm.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/rotary.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "ops/structure.h"
#include "ops/swiglu.h"
#include "ops/unary.h"
#include "ops/views.h"
#include "python/src/bind.h"

namespace reprise::python {

namespace {

using nb::arg;

// A 0-d tensor of x's dtype and device holding s: Python scalars meet
// tensors through it where reprise has no scalar form of the op.
Tensor scalar_like(const Tensor& x, double s) { return Tensor::full({}, s, x.dtype(), x.device()); }

rng::Generator& generator_arg(rng::Generator* g) { return g ? *g : rng::default_generator(); }

// Shape arguments given as separate ints or one sequence: reshape(2, 3) or
// reshape((2, 3)).
Shape shape_args(const nb::args& args) {
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) return shape_arg(args[0]);
  return shape_arg(args);
}

ops::Reduction reduction_arg(std::string_view r) {
  if (r == "mean") return ops::Reduction::mean;
  if (r == "sum") return ops::Reduction::sum;
  REPRISE_FAIL("cross_entropy: reduction '", r, "' (expected 'mean' or 'sum')");
}

// An op as a module function f(x, ...) and the method x.f(...).
struct ModuleAndMethod {
  nb::module_& m;
  nb::class_<Tensor>& cls;
  template <class F, class... Rest>
  void operator()(const char* name, F f, const char* doc, Rest... rest) const {
    m.def(name, f, arg("x"), rest..., doc);
    cls.def(name, f, rest..., doc);
  }
};

// ---- elementwise -------------------------------------------------------------

void bind_elementwise(nb::module_& m, nb::class_<Tensor>& cls) {
  const ModuleAndMethod both{m, cls};

#define REPRISE_BIND_UNARY(name, Forward, Gradient, reads, lo, hi, doc) \
  both(#name, &ops::name, doc);
  REPRISE_UNARY_OPS(REPRISE_BIND_UNARY)
#undef REPRISE_BIND_UNARY
  both("pow", &ops::pow, "x ** exponent (a scalar exponent)", arg("exponent"));

  using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
  using ScalarFn = Tensor (*)(const Tensor&, double);
  m.def("add", BinaryFn(&ops::add), arg("a"), arg("b"), "a + b, broadcast; one dtype and device.");
  m.def("add", ScalarFn(&ops::add), arg("x"), arg("s"));
  m.def("sub", &ops::sub, arg("a"), arg("b"));
  m.def("mul", BinaryFn(&ops::mul), arg("a"), arg("b"));
  m.def("mul", ScalarFn(&ops::mul), arg("x"), arg("s"));
  m.def("div", &ops::div, arg("a"), arg("b"));

  cls.def("__neg__", &ops::neg)
      .def("__add__", BinaryFn(&ops::add))
      .def("__add__", ScalarFn(&ops::add))
      .def("__radd__", ScalarFn(&ops::add))
      .def("__sub__", &ops::sub)
      .def("__sub__", [](const Tensor& x, double s) { return ops::add(x, -s); })
      .def("__rsub__", [](const Tensor& x, double s) { return ops::add(ops::mul(x, -1.0), s); })
      .def("__mul__", BinaryFn(&ops::mul))
      .def("__mul__", ScalarFn(&ops::mul))
      .def("__rmul__", ScalarFn(&ops::mul))
      .def("__truediv__", &ops::div)
      .def("__truediv__", [](const Tensor& x, double s) { return ops::div(x, scalar_like(x, s)); })
      .def("__rtruediv__", [](const Tensor& x, double s) { return ops::div(scalar_like(x, s), x); })
      .def("__pow__", &ops::pow)
      .def("__matmul__", &ops::matmul);

  both("swiglu", &ops::swiglu, "silu(gate) * up as one op.", arg("up"));

  // Every arithmetic operator both ways with a Python scalar, as torch.
  cls.def("__abs__", &ops::abs)
      .def("__rpow__",
           [](const Tensor& x, double s) {
             // s ** x = e^(x ln s); s must be positive (0 ** x has no gradient at 0).
             REPRISE_CHECK(s > 0, "pow: ", s, " ** ", x.describe(),
                           ": a scalar base must be positive");
             return ops::exp(ops::mul(x, std::log(s)));
           })
      .def("__pow__", [](const Tensor& x, const Tensor& e) {
        // x ** e = e^(e ln x) for x > 0, broadcast.
        return ops::exp(ops::mul(e, ops::log(x)));
      });
  both("maximum", &ops::maximum, "The larger of x and other, NaN where either is.", arg("other"));
  both("minimum", &ops::minimum, "The smaller of x and other, NaN where either is.", arg("other"));
  using Bound = std::optional<std::variant<double, Tensor>>;
  const auto clamp = [](const Tensor& x, Bound min, Bound max) {
    const auto tensor = [&](const Bound& b) {
      if (!b) return Tensor();
      if (const double* v = std::get_if<double>(&*b)) return scalar_like(x, *v);
      return std::get<Tensor>(*b);
    };
    return ops::clamp(x, tensor(min), tensor(max));
  };
  for (const char* name : {"clamp", "clip"}) {
    both(name, clamp, "x limited to [min, max] (scalars or tensors; either may be None).",
         arg("min") = nb::none(), arg("max") = nb::none());
  }
}

// ---- comparisons and logic ---------------------------------------------------

// a op b for a tensor or a Python scalar b; bool, no gradient.
Tensor compared(CompareOp op, const Tensor& a, const std::variant<Tensor, double>& b) {
  if (const double* s = std::get_if<double>(&b)) return ops::compare(op, a, *s);
  return ops::compare(op, a, std::get<Tensor>(b));
}

void bind_comparisons(nb::module_& m, nb::class_<Tensor>& cls) {
  const ModuleAndMethod both{m, cls};
  using Other = std::variant<Tensor, double>;
  static constexpr std::pair<CompareOp, const char*> kOperators[] = {
      {CompareOp::eq, "__eq__"}, {CompareOp::ne, "__ne__"}, {CompareOp::lt, "__lt__"},
      {CompareOp::le, "__le__"}, {CompareOp::gt, "__gt__"}, {CompareOp::ge, "__ge__"}};
  for (const auto& [op, dunder] : kOperators) {
    const auto f = [op](const Tensor& a, const Other& b) { return compared(op, a, b); };
    both(compare_op_name(op), f, "Elementwise comparison, broadcast -> bool (no gradient).",
         arg("other"));
    cls.def(dunder, f);
  }
  // Comparing with something that is not a tensor or a number (None, a
  // string) is not equal, as for any Python object. nanobind tries every
  // overload without conversions first, so a Python int reaches these too.
  for (const CompareOp op : {CompareOp::eq, CompareOp::ne}) {
    cls.def(
        op == CompareOp::eq ? "__eq__" : "__ne__",
        [op](const Tensor& a, nb::handle other) -> nb::object {
          if (nb::isinstance<nb::int_>(other) || nb::isinstance<nb::float_>(other)) {
            return nb::cast(ops::compare(op, a, nb::cast<double>(other)));
          }
          return nb::bool_(op == CompareOp::ne);
        },
        arg("other").none());
  }
  // == made Tensor unhashable; tensors hash by identity, as torch's.
  cls.def("__hash__", [](nb::handle self) { return nb::hash(nb::int_(uintptr_t(self.ptr()))); });
  both("isnan", &ops::isnan, "x != x: where x is NaN.");
  both("logical_not", &ops::logical_not, "not a (bool).");
  both("logical_and", &ops::logical_and, "a and b (bool), broadcast.", arg("other"));
  both("logical_or", &ops::logical_or, "a or b (bool), broadcast.", arg("other"));
  both("logical_xor", &ops::logical_xor, "a xor b (bool), broadcast.", arg("other"));
  cls.def("__invert__", &ops::logical_not)
      .def("__and__", &ops::logical_and)
      .def("__or__", &ops::logical_or)
      .def("__xor__", &ops::logical_xor);
}

// ---- reductions --------------------------------------------------------------

void bind_reductions(nb::module_& m, nb::class_<Tensor>& cls) {
  const ModuleAndMethod both{m, cls};
  both(
      "sum",
      [](const Tensor& x, std::optional<ShapeLike> dim, bool keepdim) {
        return ops::sum(x, dim ? dim->value : Shape{}, keepdim);
      },
      "Sum over dim (an int or a sequence; None: all).", arg("dim") = nb::none(),
      arg("keepdim") = false);
  both(
      "mean",
      [](const Tensor& x, std::optional<ShapeLike> dim, bool keepdim) {
        return ops::mean(x, dim ? dim->value : Shape{}, keepdim);
      },
      "Mean over dim (an int or a sequence; None: all).", arg("dim") = nb::none(),
      arg("keepdim") = false);
  // max(x) and min(x): the largest element; with dim, (values, indices).
  for (const bool smallest : {false, true}) {
    both(
        smallest ? "min" : "max",
        [smallest](const Tensor& x, std::optional<int64_t> dim, bool keepdim) -> nb::object {
          if (!dim) return nb::cast(smallest ? ops::amin(x) : ops::amax(x));
          const ops::MaxResult r =
              smallest ? ops::min(x, *dim, keepdim) : ops::max(x, *dim, keepdim);
          return nb::make_tuple(r.values, r.indices);
        },
        smallest ? "The smallest element; with dim, (values, indices) of the minimum along it."
                 : "The largest element; with dim, (values, indices) of the maximum along it; "
                   "NaN is the maximum.",
        arg("dim") = nb::none(), arg("keepdim") = false);
  }
  const auto dims = [](const std::optional<ShapeLike>& dim) { return dim ? dim->value : Shape{}; };
  for (const bool smallest : {false, true}) {
    both(
        smallest ? "amin" : "amax",
        [dims, smallest](const Tensor& x, std::optional<ShapeLike> dim, bool keepdim) {
          return smallest ? ops::amin(x, dims(dim), keepdim) : ops::amax(x, dims(dim), keepdim);
        },
        smallest ? "Smallest over dim (an int or a sequence; None: all)."
                 : "Largest over dim (an int or a sequence; None: all).",
        arg("dim") = nb::none(), arg("keepdim") = false);
  }
  both("argmax", &ops::argmax, "i64 index of the first maximum along dim (None: flattened).",
       arg("dim") = nb::none(), arg("keepdim") = false);
  both("argmin", &ops::argmin, "i64 index of the first minimum along dim (None: flattened).",
       arg("dim") = nb::none(), arg("keepdim") = false);
  both(
      "logsumexp",
      [](const Tensor& x, ShapeLike dim, bool keepdim) {
        return ops::logsumexp(x, dim.value, keepdim);
      },
      "log(sum(exp(x))) over dim, without overflow.", arg("dim"), arg("keepdim") = false);
  for (const bool root : {false, true}) {
    both(
        root ? "std" : "var",
        [dims, root](const Tensor& x, std::optional<ShapeLike> dim, double correction,
                     bool keepdim) {
          return root ? ops::std(x, dims(dim), correction, keepdim)
                      : ops::var(x, dims(dim), correction, keepdim);
        },
        root ? "Standard deviation over dim: sqrt(var)."
             : "sum((x - mean)^2) / (n - correction) over dim (None: all).",
        arg("dim") = nb::none(), nb::kw_only(), arg("correction") = 1.0, arg("keepdim") = false);
  }
  both(
      "cumsum",
      [](const Tensor& x, int64_t dim, std::optional<DTypeLike> dtype) {
        return ops::cumsum(dtype ? ops::cast(x, dtype->get()) : x, dim);
      },
      "Running sum along dim, added in order; integers sum in i64.", arg("dim"), nb::kw_only(),
      arg("dtype") = nb::none());
}

// ---- layers ------------------------------------------------------------------

void bind_layer_ops(nb::module_& m, nb::class_<Tensor>& cls) {
  const ModuleAndMethod both{m, cls};
  both("softmax", &ops::softmax, "", arg("dim") = -1);
  both("log_softmax", &ops::log_softmax, "", arg("dim") = -1);
  both("matmul", &ops::matmul, "x: (..., M, K), b: (K, N) or (..., K, N) -> (..., M, N).",
       arg("b"));
  m.def("linear", &ops::linear, arg("x"), arg("w"), "x @ w^T; w: (N, K), PyTorch's layout.");
  m.def(
      "cross_entropy",
      [](const Tensor& logits, const Tensor& targets, int64_t ignore_index,
         std::string_view reduction) {
        return ops::cross_entropy(logits, targets, ignore_index, reduction_arg(reduction));
      },
      arg("logits"), arg("targets"), arg("ignore_index") = -100, arg("reduction") = "mean",
      "torch's F.cross_entropy: logits (N, C), targets (N) i64.");
  m.def("rmsnorm", &ops::rmsnorm, arg("x"), arg("weight"), arg("eps") = 1e-6);
  m.def(
      "layernorm",
      [](const Tensor& x, const Tensor& w, std::optional<Tensor> b, double eps) {
        return ops::layernorm(x, w, tensor_or_undefined(b), eps);
      },
      arg("x"), arg("weight"), arg("bias") = nb::none(), arg("eps") = 1e-5);
  m.def(
      "rotary",
      [](const Tensor& x, const std::variant<Tensor, int64_t>& positions, double theta) {
        if (const int64_t* start = std::get_if<int64_t>(&positions)) {
          return ops::rotary(x, *start, theta);
        }
        return ops::rotary(x, std::get<Tensor>(positions), theta);
      },
      arg("x"), arg("positions"), arg("theta") = 10000.0,
      "RoPE (HF's rotate_half) of x (B, H, T, D) at positions: a (T) or (B, T) tensor, or the "
      "first position as an int.");
  m.def("embedding", &ops::embedding, arg("weight"), arg("ids"),
        arg("padding_idx").none() = nb::none(),
        "weight[ids]; padding_idx (torch's): that row gets no gradient.");
  m.def(
      "scaled_dot_product_attention",
      [](const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
         std::optional<double> scale, int64_t window, std::optional<Tensor> sinks, double dropout_p,
         rng::Generator* generator, std::string dropout_stream) {
        return ops::scaled_dot_product_attention(q, k, v,
                                                 {.causal = causal,
                                                  .window = window,
                                                  .scale = scale,
                                                  .dropout_p = dropout_p,
                                                  .sinks = sinks.value_or(Tensor()),
                                                  .generator = generator,
                                                  .dropout_stream = std::move(dropout_stream)});
      },
      arg("q"), arg("k"), arg("v"), nb::kw_only(), arg("causal") = false, arg("scale") = nb::none(),
      arg("window") = 0, arg("sinks") = nb::none(), arg("dropout_p") = 0.0,
      arg("generator") = nb::none(), arg("dropout_stream") = "dropout",
      "softmax(scale q k^T + mask) v per batch and head; q (B, Hq, T, D), k and v (B, Hkv, S, "
      "D); grouped-query when Hkv < Hq. window: each causal query sees at most that many keys "
      "(0: all). sinks (Hq): a logit per head in each row's denominator (GPT-OSS). Dropout on "
      "the weights draws from the generator's stream and replays exactly.");
  m.def(
      "gated_delta_rule",
      [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& decay, const Tensor& beta,
         std::optional<Tensor> state) {
        const ops::DeltaRuleResult r =
            ops::gated_delta_rule(q, k, v, decay, beta, state.value_or(Tensor()));
        return std::make_pair(r.out, r.state);
      },
      arg("q"), arg("k"), arg("v"), arg("decay"), arg("beta"), arg("state") = nb::none(),
      "The gated delta rule (a gated DeltaNet layer's recurrence), position by position: q, k "
      "(B, T, H, K), v (B, T, H, V), decay and beta (B, T, H), state (B, H, K, V) or None "
      "(zeros) -> (out (B, T, H, V), the state after the last position, which takes no "
      "gradient). A sequence fed in pieces from the returned states gives one call's bits.");
}

// ---- indexing ----------------------------------------------------------------

void bind_indexing(nb::module_& m, nb::class_<Tensor>& cls) {
  const ModuleAndMethod both{m, cls};
  both("index_select", &ops::index_select, "", arg("dim"), arg("index"));
  both("gather", &ops::gather, "out[p] = x[p with p[dim] = index[p]].", arg("dim"), arg("index"));
  both("scatter_add", &ops::scatter_add, "", arg("dim"), arg("index"), arg("src"));
  both("index_add", &ops::index_add, "", arg("dim"), arg("index"), arg("src"));
  using Side = std::variant<Tensor, double>;
  m.def(
      "where",
      [](const Tensor& cond, const Side& a, const Side& b) {
        const double* sa = std::get_if<double>(&a);
        const double* sb = std::get_if<double>(&b);
        REPRISE_CHECK(!(sa && sb), "where: both sides are scalars; give at least one tensor");
        if (sa) return ops::where(cond, *sa, std::get<Tensor>(b));
        if (sb) return ops::where(cond, std::get<Tensor>(a), *sb);
        return ops::where(cond, std::get<Tensor>(a), std::get<Tensor>(b));
      },
      arg("condition"), arg("input"), arg("other"),
      "input where condition (bool) is true, else other; either side may be a scalar.");
  both("masked_fill", &ops::masked_fill, "x with value where mask (bool, broadcast) is true.",
       arg("mask"), arg("value"));
  both(
      "topk",
      [](const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
        ops::TopKResult r = ops::topk(x, k, dim, largest, sorted);
        return nb::make_tuple(r.values, r.indices);
      },
      "(values, indices) of the k largest (or smallest) along dim.", arg("k"), arg("dim") = -1,
      arg("largest") = true, arg("sorted") = true);
  // Always stable: `stable` is accepted, with torch's default, and a
  // stable sort is also a correct unstable one.
  both(
      "sort",
      [](const Tensor& x, int64_t dim, bool descending, bool) {
        ops::TopKResult r = ops::sort(x, dim, descending);
        return nb::make_tuple(r.values, r.indices);
      },
      "(values, indices) of x sorted along dim; stable (equal values keep their order), NaN "
      "above every number.",
      arg("dim") = -1, arg("descending") = false, nb::kw_only(), arg("stable") = false);
  both(
      "argsort",
      [](const Tensor& x, int64_t dim, bool descending, bool) {
        return ops::argsort(x, dim, descending);
      },
      "sort's indices.", arg("dim") = -1, arg("descending") = false, nb::kw_only(),
      arg("stable") = false);
  m.def(
      "einsum",
      [](const std::string& equation, nb::args operands) {
        std::vector<Tensor> tensors;
        if (operands.size() == 1 && !nb::isinstance<Tensor>(operands[0])) {
          tensors = nb::cast<std::vector<Tensor>>(operands[0]);  // einsum(eq, [a, b])
        } else {
          for (nb::handle h : operands) tensors.push_back(nb::cast<Tensor>(h));
        }
        return ops::einsum(equation, tensors);
      },
      arg("equation"), arg("operands"),
      "torch.einsum: einsum(\"bhqd,bhkd->bhqk\", q, k), lowered to permutes, sums and "
      "matmuls.");
}

// ---- layout ------------------------------------------------------------------

void bind_layout(nb::module_& m, nb::class_<Tensor>& cls) {
  const ModuleAndMethod both{m, cls};
  m.def(
      "reshape", [](const Tensor& x, ShapeLike shape) { return ops::reshape(x, shape.value); },
      arg("x"), arg("shape"));
  cls.def(
      "reshape", [](const Tensor& x, nb::args shape) { return ops::reshape(x, shape_args(shape)); },
      "reshape(2, 3) or reshape((2, 3)); one dim may be -1 (a view when the layout allows).");
  both("transpose", &ops::transpose, "", arg("dim0"), arg("dim1"));
  m.def(
      "permute", [](const Tensor& x, ShapeLike dims) { return ops::permute(x, dims.value); },
      arg("x"), arg("dims"));
  cls.def("permute",
          [](const Tensor& x, nb::args dims) { return ops::permute(x, shape_args(dims)); });
  both("slice", &ops::slice, "", arg("dim"), arg("start"), arg("end"), arg("step") = 1);
  m.def(
      "expand", [](const Tensor& x, ShapeLike shape) { return ops::expand(x, shape.value); },
      arg("x"), arg("shape"));
  cls.def("expand",
          [](const Tensor& x, nb::args shape) { return ops::expand(x, shape_args(shape)); });
  both("squeeze", &ops::squeeze, "", arg("dim"));
  both("unsqueeze", &ops::unsqueeze, "", arg("dim"));
  both("contiguous", &ops::contiguous, "x itself when contiguous, else a recorded copy.");
  cls.def_prop_ro(
      "T",
      [](const Tensor& x) {
        REPRISE_CHECK(x.dim() == 2, "Tensor.T: expected a 2-D tensor, got ", x.describe());
        return ops::transpose(x, 0, 1);
      },
      "The transpose of a 2-D tensor.");
  m.def("cat", &ops::cat, arg("tensors"), arg("dim") = 0);
  m.def("stack", &ops::stack, arg("tensors"), arg("dim") = 0);
  both(
      "split",
      [](const Tensor& x, const std::variant<int64_t, std::vector<int64_t>>& sizes, int64_t dim) {
        if (const int64_t* size = std::get_if<int64_t>(&sizes)) return ops::split(x, *size, dim);
        return ops::split(x, std::get<std::vector<int64_t>>(sizes), dim);
      },
      "Views of x along dim: pieces of the given sizes, or of one size (an int).",
      arg("split_size_or_sizes"), arg("dim") = 0);
  both(
      "cast", [](const Tensor& x, DTypeLike dtype) { return ops::cast(x, dtype.get()); },
      "x converted to dtype (differentiable between floating dtypes).", arg("dtype"));
  cls.def(
      "view", [](const Tensor& x, nb::args shape) { return ops::reshape(x, shape_args(shape)); },
      "reshape under torch's other name.");
  both(
      "chunk",
      [](const Tensor& x, int64_t chunks, int64_t dim) {
        REPRISE_CHECK(chunks > 0, "chunk: expected a positive count, got ", chunks);
        const int64_t size = x.size(dim);
        return ops::split(x, std::max<int64_t>((size + chunks - 1) / chunks, 1), dim);
      },
      "At most `chunks` views along dim, each of ceil(size / chunks) but the last.", arg("chunks"),
      arg("dim") = 0);
  both("tril", &ops::tril, "The lower triangle of the last two dims, the rest 0.",
       arg("diagonal") = 0);
  both("triu", &ops::triu, "The upper triangle of the last two dims, the rest 0.",
       arg("diagonal") = 0);
  both(
      "flip", [](const Tensor& x, ShapeLike dims) { return ops::flip(x, dims.value); },
      "x reversed along dims.", arg("dims"));
  both(
      "roll",
      [](const Tensor& x, ShapeLike shifts, std::optional<ShapeLike> dims) {
        return ops::roll(x, shifts.value, dims ? dims->value : Shape{});
      },
      "x shifted along dims, wrapping around (no dims: the flattened x).", arg("shifts"),
      arg("dims") = nb::none());
  cls.def(
      "repeat", [](const Tensor& x, nb::args sizes) { return ops::repeat(x, shape_args(sizes)); },
      "x tiled: repeat(2, 1) or repeat((2, 1)).");
  m.def("one_hot", &ops::one_hot, arg("ids"), arg("num_classes") = -1,
        "ids (...) integers -> (..., num_classes) i64 with a 1 at each id.");
  m.def(
      "pad",
      [](const Tensor& x, ShapeLike pad, std::string_view mode, double value) {
        REPRISE_CHECK(mode == "constant", "pad: mode '", mode, "' (reprise pads with a constant)");
        return ops::pad(x, pad.value, value);
      },
      arg("x"), arg("pad"), arg("mode") = "constant", arg("value") = 0.0,
      "torch's F.pad: (before, after) widths from the last dim back; negative ones crop.");
}

// ---- mixture of experts ------------------------------------------------------

void bind_moe_ops(nb::module_& m) {
  nb::class_<ops::MoeRoute>(m, "MoeRoute", "What moe_route returns (ops/moe_route.h).")
      .def_ro("weights", &ops::MoeRoute::weights)
      .def_ro("indices", &ops::MoeRoute::indices)
      .def_ro("token", &ops::MoeRoute::token)
      .def_ro("counts", &ops::MoeRoute::counts)
      .def_ro("routed", &ops::MoeRoute::routed)
      .def_ro("margin", &ops::MoeRoute::margin);
  m.def(
      "moe_route",
      [](const Tensor& scores, int64_t k, bool renormalize, int64_t capacity,
         std::optional<Tensor> bias, int64_t n_group, int64_t topk_group, double scale) {
        return ops::moe_route(scores, k,
                              {.renormalize = renormalize,
                               .capacity = capacity,
                               .bias = bias.value_or(Tensor()),
                               .n_group = n_group,
                               .topk_group = topk_group,
                               .scale = scale});
      },
      arg("scores"), arg("k"), arg("renormalize"), arg("capacity") = -1, arg("bias") = nb::none(),
      arg("n_group") = 1, arg("topk_group") = 1, arg("scale") = 1.0,
      "Top-k routing of scores (N, E), as one recorded op: gates in dispatch order, the "
      "chosen experts, and the dispatch blocks. bias, n_group, topk_group, scale: DeepSeek-V3's "
      "group-limited choice by biased scores, gates times scale.");
  m.def("grouped_linear", &ops::grouped_linear, arg("x"), arg("counts"), arg("weights"),
        "Consecutive row blocks of x (counts[e] rows each) times their own weight (N, K).");
}

// ---- random ------------------------------------------------------------------

void bind_random(nb::module_& m) {
  auto random = [&](const char* name, auto op, const char* doc) {
    m.def(
        name,
        [op](nb::args shape, rng::Generator* gen, std::string_view stream, DTypeLike dtype) {
          return op(shape_args(shape), generator_arg(gen), stream, dtype.get());
        },
        arg("shape"), nb::kw_only(), arg("generator") = nb::none(), arg("stream") = "default",
        arg("dtype") = DType::f32, doc);
  };
  random(
      "rand",
      [](const Shape& s, rng::Generator& g, std::string_view st, DType d) {
        return ops::rand(s, g, st, d);
      },
      "Uniform on (0, 1], cuRAND's words.");
  random(
      "randn",
      [](const Shape& s, rng::Generator& g, std::string_view st, DType d) {
        return ops::randn(s, g, st, d);
      },
      "Standard normal (Box-Muller in cuRAND's pairing).");
  m.def(
      "bernoulli",
      [](ShapeLike shape, double p, rng::Generator* gen, std::string_view stream, DTypeLike dtype) {
        return ops::bernoulli(shape.value, p, generator_arg(gen), stream, dtype.get());
      },
      arg("shape"), arg("p"), nb::kw_only(), arg("generator") = nb::none(),
      arg("stream") = "default", arg("dtype") = DType::f32);
  m.def(
      "dropout",
      [](const Tensor& x, double p, rng::Generator* gen, bool training, std::string_view stream) {
        return ops::dropout(x, p, generator_arg(gen), training, stream);
      },
      arg("x"), arg("p"), nb::kw_only(), arg("generator") = nb::none(), arg("training") = true,
      arg("stream") = "dropout",
      "Inverted dropout; the mask comes from a recorded reservation, so recompute replays it.");
}

// In-place initialisers return the tensor they filled.
void bind_initialisers(nb::module_& m) {
  m.def(
      "normal_",
      [](Tensor& t, double mean, double std, rng::Generator* gen, std::string_view stream) {
        return ops::normal_(t, mean, std, generator_arg(gen), stream);
      },
      arg("t"), arg("mean") = 0.0, arg("std") = 1.0, nb::kw_only(), arg("generator") = nb::none(),
      arg("stream") = "init");
  m.def(
      "uniform_",
      [](Tensor& t, double low, double high, rng::Generator* gen, std::string_view stream) {
        return ops::uniform_(t, low, high, generator_arg(gen), stream);
      },
      arg("t"), arg("low") = 0.0, arg("high") = 1.0, nb::kw_only(), arg("generator") = nb::none(),
      arg("stream") = "init");
  m.def(
      "trunc_normal_",
      [](Tensor& t, double mean, double std, double a, double b, rng::Generator* gen,
         std::string_view stream) {
        return ops::trunc_normal_(t, mean, std, a, b, generator_arg(gen), stream);
      },
      arg("t"), arg("mean") = 0.0, arg("std") = 1.0, arg("a") = -2.0, arg("b") = 2.0, nb::kw_only(),
      arg("generator") = nb::none(), arg("stream") = "init");
  m.def(
      "kaiming_uniform_",
      [](Tensor& t, double a, rng::Generator* gen, std::string_view stream) {
        return ops::kaiming_uniform_(t, a, generator_arg(gen), stream);
      },
      arg("t"), arg("a") = 0.0, nb::kw_only(), arg("generator") = nb::none(),
      arg("stream") = "init");
}

}  // namespace

void bind_ops(nb::module_& m, nb::class_<Tensor>& cls) {
  bind_elementwise(m, cls);
  bind_comparisons(m, cls);
  bind_reductions(m, cls);
  bind_layer_ops(m, cls);
  bind_indexing(m, cls);
  bind_layout(m, cls);
  bind_moe_ops(m);
  bind_random(m);
  bind_initialisers(m);
}

}  // namespace reprise::python
