// embedding: a row gather forward; a deterministic scatter-add backward
// (Backend::embedding_backward sums each vocabulary row in id order).
// n = number of ids, V = vocabulary size, C = embedding width.
#include "ops/embedding.h"

#include "autograd/tape.h"
#include "engine/backend.h"
#include "ops/check.h"
#include "ops/registry.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// Raises unless every id lies in [0, V), naming the first one that does not.
void check_ids(const Tensor& ids, const Tensor& weight) {
  const int64_t V = weight.size(0);
  if (const auto bad = detail::first_out_of_range(ids, V)) {
    REPRISE_FAIL("embedding: id ", bad->first, " at flat index ", bad->second, " of ids ",
                 ids.describe(), " is out of range for weight ", weight.describe(),
                 " (expected ids in [0, ", V, "))");
  }
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids, std::optional<int64_t> padding_idx) {
  detail::check_float("embedding", weight);
  REPRISE_CHECK(weight.dim() == 2, "embedding: expected weight of shape (V, C), got ",
                weight.describe());
  detail::check_index_tensor("embedding", "ids", ids, weight);
  const int64_t V = weight.size(0);
  REPRISE_CHECK(!padding_idx || (*padding_idx >= 0 && *padding_idx < V), "embedding: padding_idx ",
                padding_idx.value_or(0), " is not a row of weight ", weight.describe());
  return autograd::record_one({
      .op = registry::kEmbedding,
      .inputs = {weight, ids},
      .forward =
          [](const Tensors& in, auto*) {
            check_ids(in[1], in[0]);
            return Tensors{backend_of(in[0]).embedding(in[0], in[1])};
          },
      .backward =
          [V, padding_idx](Node& node, const Tensors& g) {
            Tensor dweight = backend_of(g[0]).embedding_backward(g[0], node.saved_input(1), V);
            if (padding_idx) dweight.select(0, *padding_idx).fill_(0.0);  // (C), a row view
            return Tensors{dweight, Tensor()};
          },
      .save = {.inputs = {1}},
  });
}

}  // namespace reprise::ops
