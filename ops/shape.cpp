// cat, split, stack: forward and backward rule for each. The copies
// go through Tensor::copy_, which walks any strides and splits the work
// across threads (each element written once, so thread-count independent).
#include "ops/shape.h"

#include "autograd/tape.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

std::string describe_all(const std::vector<Tensor>& tensors) {
  std::string s;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i) s += ", ";
    s += tensors[i].defined() ? tensors[i].describe() : "undefined";
  }
  return s;
}

// Checks that `tensors` is a non-empty list of defined tensors of one
// dtype, device and rank.
void check_list(const char* op, const std::vector<Tensor>& tensors) {
  REPRISE_CHECK(!tensors.empty(), op, ": expected at least one tensor");
  for (const Tensor& t : tensors) {
    REPRISE_CHECK(t.defined(), op, ": undefined tensor in (", describe_all(tensors), ")");
    REPRISE_CHECK(t.dtype() == tensors[0].dtype() && t.device() == tensors[0].device() &&
                      t.dim() == tensors[0].dim(),
                  op, ": expected tensors of one dtype, device and rank, got (",
                  describe_all(tensors), ")");
  }
}

// wrap_dim, with t named in the message; `extra` = 1 for stack's new dim.
int64_t wrap(const char* op, int64_t dim, const Tensor& t, int64_t extra = 0) {
  const int64_t n = t.dim() + extra;
  REPRISE_CHECK(dim >= -n && dim < n, op, ": dim ", dim, " is out of range for ", t.describe(),
                " (expected ", -n, "..", n - 1, ")");
  return dim < 0 ? dim + n : dim;
}

// The non-recording cat: copies each tensor into its slice of the output.
Tensor cat_kernel(const std::vector<Tensor>& tensors, int64_t dim) {
  Shape shape = tensors[0].shape();
  shape[size_t(dim)] = 0;
  for (const Tensor& t : tensors) shape[size_t(dim)] += t.size(dim);
  Tensor out = Tensor::empty(shape, tensors[0].dtype(), tensors[0].device());
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    out.slice(dim, offset, offset + t.size(dim)).copy_(t);
    offset += t.size(dim);
  }
  return out;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  check_list("cat", tensors);
  REPRISE_CHECK(tensors[0].dim() > 0, "cat: cannot concatenate 0-dim tensors (",
                describe_all(tensors), "); unsqueeze them or use stack");
  dim = wrap("cat", dim, tensors[0]);
  std::vector<int64_t> sizes;
  for (const Tensor& t : tensors) {
    for (int64_t d = 0; d < t.dim(); ++d) {
      REPRISE_CHECK(d == dim || t.size(d) == tensors[0].size(d), "cat: along dim ", dim,
                    " the tensors must agree in every other dim, got (", describe_all(tensors),
                    ")");
    }
    sizes.push_back(t.size(dim));
  }
  return autograd::record_one({
      .op = registry::kCat,
      .inputs = tensors,
      .forward = [dim](const Tensors& in, auto*) { return Tensors{cat_kernel(in, dim)}; },
      // Each input's gradient is its slice of g (a view).
      .backward =
          [dim, sizes](Node& node, const Tensors& g) {
            Tensors grads(sizes.size());
            int64_t offset = 0;
            for (size_t i = 0; i < sizes.size(); ++i) {
              if (node.needs_input_grad(i)) grads[i] = g[0].slice(dim, offset, offset + sizes[i]);
              offset += sizes[i];
            }
            return grads;
          },
  });
}

namespace detail {
std::vector<int64_t> chunk_sizes(const Tensor& x, int64_t split_size, int64_t dim) {
  REPRISE_CHECK(x.defined(), "split: undefined input");
  REPRISE_CHECK(x.dim() > 0, "split: cannot split a 0-dim tensor ", x.describe());
  dim = wrap("split", dim, x);
  REPRISE_CHECK(split_size > 0 || (split_size == 0 && x.size(dim) == 0),
                "split: split_size must be positive, got ", split_size, " for ", x.describe());
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < x.size(dim); start += split_size)
    sizes.push_back(std::min(split_size, x.size(dim) - start));
  if (sizes.empty()) sizes.push_back(0);  // an empty dim gives one empty piece
  return sizes;
}
}  // namespace detail

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  REPRISE_CHECK(x.defined(), "split: undefined input");
  REPRISE_CHECK(x.dim() > 0, "split: cannot split a 0-dim tensor ", x.describe());
  REPRISE_CHECK(x.defined(), "split: undefined input");
  dim = wrap("split", dim, x);
  REPRISE_CHECK(!sizes.empty(), "split: expected at least one size for ", x.describe());
  int64_t total = 0;
  for (int64_t s : sizes) {
    REPRISE_CHECK(s >= 0, "split: negative size ", s, " in ", to_string(Shape(sizes)));
    total += s;
  }
  REPRISE_CHECK(total == x.size(dim), "split: sizes ", to_string(Shape(sizes)), " sum to ", total,
                ", expected dim ", dim, " of ", x.describe(), " (", x.size(dim), ")");
  return autograd::record({
      .op = registry::kSplit,
      .inputs = {x},
      .forward =
          [dim, sizes](const Tensors& in, auto*) {
            Tensors pieces;
            int64_t offset = 0;
            for (int64_t s : sizes) {
              pieces.push_back(in[0].slice(dim, offset, offset + s));
              offset += s;
            }
            return pieces;
          },
      // The engine hands zeros for pieces that received no gradient, so g
      // always covers x.
      .backward = [dim](Node&, const Tensors& g) { return Tensors{cat_kernel(g, dim)}; },
  });
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  check_list("stack", tensors);
  for (const Tensor& t : tensors) {
    REPRISE_CHECK(t.shape() == tensors[0].shape(), "stack: expected tensors of one shape, got (",
                  describe_all(tensors), ")");
  }
  dim = wrap("stack", dim, tensors[0], 1);
  Shape shape = tensors[0].shape();
  shape.insert(shape.begin() + dim, int64_t(tensors.size()));
  return autograd::record_one({
      .op = registry::kStack,
      .inputs = tensors,
      .forward =
          [dim, shape](const Tensors& in, auto*) {
            Tensor out = Tensor::empty(shape, in[0].dtype(), in[0].device());
            for (size_t i = 0; i < in.size(); ++i) out.select(dim, int64_t(i)).copy_(in[i]);
            return Tensors{out};
          },
      // Input i's gradient is g's slice i along the new dim (a view).
      .backward =
          [dim](Node& node, const Tensors& g) {
            Tensors grads(node.inputs.size());
            for (size_t i = 0; i < grads.size(); ++i) {
              if (node.needs_input_grad(i)) grads[i] = g[0].select(dim, int64_t(i));
            }
            return grads;
          },
  });
}

}  // namespace reprise::ops
