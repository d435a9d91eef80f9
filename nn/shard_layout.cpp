#include "nn/shard_layout.h"

#include <algorithm>

namespace reprise::nn {
namespace {

int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

}  // namespace

ShardMode parse_shard_mode(const std::string& name) {
  for (const ShardMode m :
       {ShardMode::none, ShardMode::optimizer, ShardMode::gradients, ShardMode::parameters}) {
    if (name == shard_mode_name(m)) return m;
  }
  REPRISE_FAIL("expected none, optimizer, gradients or parameters, got '", name, "'");
}

const char* shard_mode_name(ShardMode m) {
  switch (m) {
    case ShardMode::none:
      return "none";
    case ShardMode::optimizer:
      return "optimizer";
    case ShardMode::gradients:
      return "gradients";
    case ShardMode::parameters:
      return "parameters";
  }
  return "?";
}

ShardLayout ShardLayout::build(std::vector<NamedParameter> params, int64_t bucket_bytes, int ranks,
                               int64_t align, const std::vector<size_t>& unit) {
  REPRISE_CHECK(bucket_bytes >= 1 && ranks >= 1 && align >= 1, "ShardLayout: bucket_bytes ",
                bucket_bytes, ", ranks ", ranks, " and align ", align, " must be >= 1");
  REPRISE_CHECK(unit.empty() || unit.size() == params.size(), "ShardLayout: ", unit.size(),
                " units for ", params.size(), " parameters");
  ShardLayout layout;
  layout.params = std::move(params);
  layout.ranks = ranks;
  // Reverse parameter order, cut where a bucket reaches bucket_bytes.
  int64_t bytes = bucket_bytes, used = 0;
  auto close = [&] {
    if (layout.buckets.empty()) return;
    Bucket& b = layout.buckets.back();
    b.block = round_up((used + ranks - 1) / ranks, align);
  };
  for (size_t i = layout.params.size(); i-- > 0;) {
    const NamedParameter& p = layout.params[i];
    REPRISE_CHECK(p.value.dtype() == DType::f32 && p.value.is_contiguous() && p.value.is_leaf(),
                  "ShardLayout: parameter '", p.name, "' must be a contiguous f32 leaf, got ",
                  p.value.describe());
    const size_t u = unit.empty() ? 0 : unit[i];
    if (bytes >= bucket_bytes || layout.buckets.empty() || layout.buckets.back().unit != u) {
      close();
      layout.buckets.push_back(Bucket{.ranks = ranks, .unit = u});
      bytes = 0;
      used = 0;
    }
    Bucket& b = layout.buckets.back();
    used = round_up(used, align);
    b.params.push_back(i);
    b.offset.push_back(used);
    used += p.value.numel();
    bytes += int64_t(p.value.nbytes());
  }
  close();
  return layout;
}

std::vector<ShardLayout::Piece> ShardLayout::pieces(int rank) const {
  REPRISE_CHECK(rank >= 0 && rank < ranks, "ShardLayout: rank ", rank, " is not in [0, ", ranks,
                ")");
  std::vector<Piece> out;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const Bucket& bucket = buckets[b];
    const int64_t lo = rank * bucket.block, hi = lo + bucket.block;
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      const int64_t first = bucket.offset[k];
      const int64_t last = first + params[bucket.params[k]].value.numel();
      const int64_t from = std::max(first, lo), to = std::min(last, hi);
      if (from >= to) continue;
      out.push_back({.param = bucket.params[k],
                     .bucket = b,
                     .begin = from - first,
                     .end = to - first,
                     .at = from - lo});
    }
  }
  return out;
}

Tensor ShardLayout::in_bucket(const Tensor& buffer, size_t b, size_t j) const {
  const Bucket& bucket = buckets[b];
  const Tensor& p = params[bucket.params[j]].value;
  return buffer.slice(0, bucket.offset[j], bucket.offset[j] + p.numel()).view(p.shape());
}

}  // namespace reprise::nn
