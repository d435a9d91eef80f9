#include "nn/routing.h"

#include <algorithm>

#include "engine/error.h"

namespace reprise::nn {
namespace {

thread_local RoutingCapture* t_capture = nullptr;
thread_local RoutingReplay* t_replay = nullptr;

}  // namespace

RoutingRecord RoutingRecord::first_positions(int64_t count) const {
  REPRISE_CHECK(count >= 0 && count <= positions, "RoutingRecord: ", count,
                " positions asked of a record of ", positions);
  const int64_t L = int64_t(layers.size());
  RoutingRecord r = *this;
  r.positions = count;
  r.experts.resize(size_t(count * L * k));
  r.margin.resize(size_t(count * L));
  return r;
}

void RoutingRecord::append(const RoutingRecord& more) {
  if (positions == 0 && layers.empty()) {
    *this = more;
    return;
  }
  RoutingRecord shape = more;
  shape.positions = positions;
  check_matches(shape, "RoutingRecord::append");
  experts.insert(experts.end(), more.experts.begin(), more.experts.end());
  margin.insert(margin.end(), more.margin.begin(), more.margin.end());
  positions += more.positions;
}

void RoutingRecord::check_matches(const RoutingRecord& o, const std::string& what) const {
  REPRISE_CHECK(
      layers == o.layers && num_experts == o.num_experts && k == o.k && positions == o.positions,
      what, ": a routing record of ", o.layers.size(), " MoE layers, E = ", o.num_experts,
      ", k = ", o.k, " and ", o.positions, " positions does not fit ", layers.size(),
      " layers, E = ", num_experts, ", k = ", k, " and ", positions, " positions",
      layers == o.layers || layers.empty() || o.layers.empty()
          ? std::string()
          : " (layer " + o.layers[0] + " against " + layers[0] + ")");
}

int64_t routing_flips(const RoutingRecord& a, const RoutingRecord& b) {
  a.check_matches(b, "routing_flips");
  int64_t flips = 0;
  std::vector<uint16_t> x(size_t(a.k)), y(size_t(a.k));
  for (size_t i = 0; i < a.experts.size(); i += size_t(a.k)) {
    std::copy_n(a.experts.begin() + int64_t(i), a.k, x.begin());
    std::copy_n(b.experts.begin() + int64_t(i), a.k, y.begin());
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    flips += x != y;
  }
  return flips;
}

RoutingCapture::RoutingCapture() : outer_(t_capture) { t_capture = this; }
RoutingCapture::~RoutingCapture() { t_capture = outer_; }

RoutingCapture* current_routing_capture() { return t_capture; }

void RoutingCapture::routed(const std::string& layer, const Tensor& indices, const Tensor& margin,
                            int64_t num_experts) {
  REPRISE_CHECK(num_experts >= 1 && num_experts <= 65536, "RoutingCapture: layer '", layer,
                "' has ", num_experts, " experts; a record holds at most 65536");
  layers_.push_back({.name = layer,
                     .num_experts = num_experts,
                     .indices = indices.to_vector<int64_t>(),
                     .margin = margin.to_vector<int64_t>(),
                     .k = indices.size(1)});
}

std::vector<RoutingRecord> RoutingCapture::records(int64_t batch, int64_t positions) const {
  std::vector<RoutingRecord> out(static_cast<size_t>(batch));
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = layers_[l];
    REPRISE_CHECK(int64_t(layer.margin.size()) == batch * positions, "RoutingCapture: layer '",
                  layer.name, "' routed ", layer.margin.size(), " tokens, not ", batch, " x ",
                  positions);
    for (size_t m = 0; m < l; ++m) {
      REPRISE_CHECK(layers_[m].name != layer.name, "RoutingCapture: layer '", layer.name,
                    "' routed twice in one forward");
    }
    REPRISE_CHECK(layer.num_experts == layers_[0].num_experts && layer.k == layers_[0].k,
                  "RoutingCapture: layer '", layer.name, "' routes to ", layer.k, " of ",
                  layer.num_experts, " experts, layer '", layers_[0].name, "' to ", layers_[0].k,
                  " of ", layers_[0].num_experts);
  }
  const int64_t L = int64_t(layers_.size());
  for (int64_t b = 0; b < batch; ++b) {
    RoutingRecord& r = out[size_t(b)];
    r.positions = positions;
    for (const Layer& layer : layers_) r.layers.push_back(layer.name);
    if (L == 0) continue;
    r.num_experts = layers_[0].num_experts;
    r.k = layers_[0].k;
    r.experts.resize(size_t(positions * L * r.k));
    r.margin.resize(size_t(positions * L));
    for (int64_t t = 0; t < positions; ++t) {
      const int64_t n = b * positions + t;  // the token in the forward
      for (int64_t l = 0; l < L; ++l) {
        const Layer& layer = layers_[size_t(l)];
        for (int64_t j = 0; j < r.k; ++j)
          r.experts[size_t((t * L + l) * r.k + j)] = uint16_t(layer.indices[size_t(n * r.k + j)]);
        r.margin[size_t(t * L + l)] = layer.margin[size_t(n)];
      }
    }
  }
  return out;
}

RoutingReplay::RoutingReplay(std::vector<RoutingRecord> records, int64_t positions)
    : records_(std::move(records)), positions_(positions), outer_(t_replay) {
  REPRISE_CHECK(!records_.empty(), "RoutingReplay: no records");
  for (size_t b = 0; b < records_.size(); ++b) {
    const RoutingRecord& r = records_[b];
    REPRISE_CHECK(r.positions <= positions, "RoutingReplay: record ", b, " has ", r.positions,
                  " positions, more than the forward's ", positions);
    RoutingRecord shape = r;
    shape.positions = records_[0].positions;
    records_[0].check_matches(shape, "RoutingReplay: record " + std::to_string(b));
  }
  t_replay = this;
}

RoutingReplay::~RoutingReplay() { t_replay = outer_; }

RoutingReplay* current_routing_replay() { return t_replay; }

std::vector<int64_t> RoutingReplay::experts(const std::string& layer, int64_t tokens,
                                            int64_t num_experts, int64_t k) const {
  const RoutingRecord& first = records_[0];
  const int64_t B = int64_t(records_.size());
  REPRISE_CHECK(tokens == B * positions_, "RoutingReplay: MoE layer '", layer, "' routes ", tokens,
                " tokens, but the records are for a forward of ", B, " x ", positions_);
  const auto it = std::find(first.layers.begin(), first.layers.end(), layer);
  REPRISE_CHECK(it != first.layers.end(), "RoutingReplay: the records have no MoE layer '", layer,
                "' (they have ", first.layers.size(), " layers",
                first.layers.empty() ? std::string() : ", the first '" + first.layers[0] + "'",
                ")");
  REPRISE_CHECK(first.num_experts == num_experts && first.k == k, "RoutingReplay: MoE layer '",
                layer, "' routes to ", k, " of ", num_experts, " experts, the records to ", first.k,
                " of ", first.num_experts);
  const int64_t l = it - first.layers.begin(), L = int64_t(first.layers.size());
  std::vector<int64_t> out(size_t(tokens * k), -1);
  for (int64_t b = 0; b < B; ++b) {
    const RoutingRecord& r = records_[size_t(b)];
    for (int64_t t = 0; t < r.positions; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = r.experts[size_t((t * L + l) * k + j)];
        REPRISE_CHECK(e < num_experts, "RoutingReplay: record ", b, " gives position ", t,
                      " of layer '", layer, "' expert ", e, ", but the layer has ", num_experts);
        const auto row = out.begin() + ((b * positions_) + t) * k;
        REPRISE_CHECK(std::find(row, row + j, e) == row + j, "RoutingReplay: record ", b,
                      " gives position ", t, " of layer '", layer, "' expert ", e, " twice");
        row[j] = e;
      }
    }
  }
  return out;
}

}  // namespace reprise::nn
