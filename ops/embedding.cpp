// embedding: a row gather forward; a deterministic scatter-add backward.
// n = number of ids, V = vocabulary size, C = embedding width.
//
// Backward: a counting sort groups the output rows by id, keeping each
// group in the order the ids appear; then each vocabulary row of dweight is
// summed by one thread, over its group in that order. No atomics, and the
// result does not depend on how vocabulary rows are split across threads.
#include "ops/embedding.h"

#include <cstring>
#include <vector>

#include "autograd/tape.h"
#include "engine/threads.h"
#include "ops/elementwise.h"

namespace reprise::ops {
namespace {

using autograd::Node;
using autograd::Tensors;

// A gather does no arithmetic.
double embedding_flops(const Tensors&, const Tensors&) { return 0.0; }
// Reads the ids and the gathered rows (not all of weight), writes the output.
double embedding_bytes(const Tensors& in, const Tensors& out) {
  return double(in[1].nbytes()) + 2.0 * double(out[0].nbytes());
}

const autograd::OpInfo kEmbedding{"embedding", false, embedding_flops, embedding_bytes};

// ids as int64, each checked against [0, V) (a sequential scan, so that an
// error is raised before any parallel kernel runs).
std::vector<int64_t> checked_ids(const Tensor& ids, const Tensor& weight) {
  const int64_t V = weight.size(0);
  std::vector<int64_t> v = ids.to_vector<int64_t>();
  for (size_t i = 0; i < v.size(); ++i) {
    REPRISE_CHECK(v[i] >= 0 && v[i] < V, "embedding: id ", v[i], " at flat index ", i, " of ids ",
                  ids.describe(), " is out of range for weight ", weight.describe(),
                  " (expected ids in [0, ", V, "))");
  }
  return v;
}

Shape output_shape(const Tensor& ids, int64_t C) {
  Shape s = ids.shape();
  s.push_back(C);
  return s;
}

// weight: (V, C), ids: (...) -> (..., C).
Tensor forward(const Tensor& weight_in, const Tensor& ids) {
  Tensor weight = weight_in.contiguous();
  const int64_t C = weight.size(1);
  std::vector<int64_t> idv = checked_ids(ids, weight);
  Tensor out = Tensor::empty(output_shape(ids, C), weight.dtype());
  dispatch_float(weight.dtype(), "embedding", [&]<class T>() {
    const T* w = weight.data<T>();
    T* o = out.data<T>();
    threads::parallel_for(int64_t(idv.size()),
                          std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)),
                          [&](int64_t i0, int64_t i1) {
                            for (int64_t i = i0; i < i1; ++i) {
                              std::memcpy(o + i * C, w + idv[size_t(i)] * C, size_t(C) * sizeof(T));
                            }
                          });
  });
  return out;
}

// g: (..., C), ids: (...) -> dweight: (V, C).
Tensor backward(const Tensor& g_in, const Tensor& ids, int64_t V, int64_t C) {
  Tensor g = g_in.contiguous();
  std::vector<int64_t> idv = ids.to_vector<int64_t>();
  const int64_t n = int64_t(idv.size());
  // start[v] .. start[v + 1]: the positions of id v in order[], which lists
  // output rows grouped by id, ascending within each group.
  std::vector<int64_t> start(size_t(V + 1), 0);
  for (int64_t id : idv) ++start[size_t(id + 1)];
  for (int64_t v = 0; v < V; ++v) start[size_t(v + 1)] += start[size_t(v)];
  std::vector<int64_t> order(static_cast<size_t>(n)), next(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i) order[size_t(next[size_t(idv[size_t(i)])]++)] = i;

  Tensor dw = Tensor::empty({V, C}, g.dtype());
  dispatch_float(g.dtype(), "embedding", [&]<class T>() {
    const T* pg = g.data<T>();
    T* pw = dw.data<T>();
    threads::parallel_for(V, std::max<int64_t>(1, 4096 / std::max<int64_t>(C, 1)),
                          [&](int64_t v0, int64_t v1) {
                            for (int64_t v = v0; v < v1; ++v) {
                              T* row = pw + v * C;
                              for (int64_t c = 0; c < C; ++c) row[c] = T(0);
                              for (int64_t k = start[size_t(v)]; k < start[size_t(v + 1)]; ++k) {
                                const T* gr = pg + order[size_t(k)] * C;
                                for (int64_t c = 0; c < C; ++c) row[c] += gr[c];
                              }
                            }
                          });
  });
  return dw;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  detail::check_float_cpu("embedding", weight);
  REPRISE_CHECK(weight.dim() == 2, "embedding: expected weight of shape (V, C), got ",
                weight.describe());
  REPRISE_CHECK(ids.defined(), "embedding: undefined ids");
  REPRISE_CHECK((ids.dtype() == DType::i64 || ids.dtype() == DType::i32) && ids.device().is_cpu(),
                "embedding: expected ids of dtype i64 or i32 on cpu, got ", ids.describe(),
                " (weight ", weight.describe(), ")");
  const int64_t V = weight.size(0), C = weight.size(1);
  return autograd::record_one({
      .op = kEmbedding,
      .inputs = {weight, ids},
      .forward = [](const Tensors& in, auto*) { return Tensors{forward(in[0], in[1])}; },
      .backward =
          [V, C](Node& node, const Tensors& g) {
            return Tensors{backward(g[0], node.saved_input(1), V, C), Tensor()};
          },
      .save = {.inputs = {1}},
  });
}

}  // namespace reprise::ops
