#include "nn/parameter_shards.h"

#include <chrono>

#include "autograd/op_registry.h"
#include "autograd/scope.h"
#include "autograd/tape.h"
#include "engine/backend.h"
#include "engine/grad_mode.h"

namespace reprise::nn {
namespace {

// The identity on a layer's output whose backward gathers the layer.
const autograd::OpInfo kRegather{.name = "regather_parameters", .flops = autograd::no_flops};

}  // namespace

ParameterShards::ParameterShards(ShardLayout layout, int rank, AllGatherAsync all_gather)
    : layout_(std::move(layout)), rank_(rank), all_gather_(std::move(all_gather)) {
  REPRISE_CHECK(all_gather_, "ParameterShards: no all_gather");
  autograd::register_op(kRegather);
  pieces_ = layout_.pieces(rank_);
  unit_of_.assign(layout_.params.size(), 0);
  for (size_t b = 0; b < layout_.buckets.size(); ++b) {
    const ShardLayout::Bucket& bucket = layout_.buckets[b];
    if (units_.size() <= bucket.unit) units_.resize(bucket.unit + 1);
    units_[bucket.unit].push_back(b);
    for (const size_t k : bucket.params) unit_of_[k] = bucket.unit;
    const Device device = layout_.params[bucket.params.front()].value.device();
    blocks_.push_back(Tensor::zeros({bucket.block}, DType::f32, device));
    blocks_.back().storage()->set_kind(MemoryKind::parameter);
  }
  unit_params_.assign(units_.size(), 0);
  for (size_t k = 0; k < layout_.params.size(); ++k) {
    index_of_[layout_.params[k].value.impl()] = k;
    ++unit_params_[unit_of_[k]];
  }
  gathered_.assign(units_.size(), true);
  layers_ = units_.empty() ? 0 : units_.size() - 1;  // the last unit is the rest of the model
  scatter();
}

void ParameterShards::scatter() {
  NoGradGuard no_grad;
  for (const ShardLayout::Piece& piece : pieces_) {
    const Tensor& p = layout_.params[piece.param].value;
    backend(p.device()).copy(piece.in_block(blocks_[piece.bucket]), piece.in_param(p));
  }
  for (size_t u = 0; u < units_.size(); ++u) {
    gathered_[u] = true;
    release(u);
  }
}

void ParameterShards::prefetch(size_t unit) {
  REPRISE_CHECK(unit < units_.size(), "ParameterShards::prefetch: unit ", unit, " of ",
                units_.size());
  if (gathered_[unit] || pending_unit_ == unit) return;
  if (pending_unit_) complete_prefetch();
  std::vector<Tensor> blocks;
  for (const size_t b : units_[unit]) blocks.push_back(blocks_[b]);
  pending_ = all_gather_(std::move(blocks));
  pending_unit_ = unit;
}

void ParameterShards::gather(size_t unit) {
  REPRISE_CHECK(unit < units_.size(), "ParameterShards::gather: unit ", unit, " of ",
                units_.size());
  if (gathered_[unit]) return;
  prefetch(unit);
  complete_prefetch();
}

void ParameterShards::complete_prefetch() {
  if (!pending_unit_) return;
  const size_t unit = *pending_unit_;
  pending_unit_.reset();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Tensor> gathered = pending_.get();  // per bucket (R, m)
  gather_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  NoGradGuard no_grad;
  for (size_t g = 0; g < units_[unit].size(); ++g) {
    const size_t b = units_[unit][g];
    const ShardLayout::Bucket& bucket = layout_.buckets[b];
    const Tensor whole = gathered.at(g).view({bucket.elements()});  // (R m)
    gathered_bytes_ += int64_t(whole.nbytes()) / bucket.ranks * (bucket.ranks - 1);
    for (size_t j = 0; j < bucket.params.size(); ++j) {
      const Tensor& p = layout_.params[bucket.params[j]].value;
      p.storage()->reload();
      // The owners' bits, which the parameter held when it was given back:
      // its version stays, so what the tape saved of it still checks.
      backend(p.device()).copy(p, layout_.in_bucket(whole, b, j));
    }
  }
  gathered_[unit] = true;
}

void ParameterShards::release(size_t unit) {
  if (!gathered_[unit]) return;
  for (const size_t b : units_[unit]) {
    for (const size_t k : layout_.buckets[b].params) layout_.params[k].value.storage()->evict();
  }
  gathered_[unit] = false;
}

void ParameterShards::release_all() {
  complete_prefetch();
  for (size_t u = 0; u < units_.size(); ++u) release(u);
}

LlamaForCausalLM::LayerRunner ParameterShards::runner(LlamaForCausalLM::LayerRunner inner) {
  return [this, inner = std::move(inner)](size_t i, const std::string& scope,
                                          const std::function<Tensor()>& layer) {
    gather(i);
    if (i + 1 < layers_) prefetch(i + 1);
    Tensor out;
    if (inner) {
      out = inner(i, scope, layer);
    } else {
      autograd::Scope named(scope);
      out = layer();
    }
    release(i);
    return autograd::record_one({
        .op = kRegather,
        .inputs = {out},
        .forward = [](const autograd::Tensors& in,
                      const rng::Reservation*) { return autograd::Tensors{in[0]}; },
        .backward =
            [this, i](autograd::Node&, const autograd::Tensors& g) {
              gather(i);
              if (i > 0) prefetch(i - 1);
              return g;
            },
    });
  };
}

std::unique_ptr<autograd::GradReadyHook> ParameterShards::release_when_done() {
  // Per unit, the gradients still to come in this backward.
  auto waiting = std::make_shared<std::vector<size_t>>(unit_params_);
  return std::make_unique<autograd::GradReadyHook>([this, waiting](const Tensor& leaf) {
    const auto it = index_of_.find(leaf.impl());
    if (it == index_of_.end()) return;
    const size_t u = unit_of_[it->second];
    if (--(*waiting)[u] == 0) release(u);
  });
}

ParameterShards::Whole::Whole(ParameterShards* shards) : shards_(shards) {
  if (shards_ == nullptr) return;
  for (size_t u = 0; u < shards_->num_units(); ++u) shards_->gather(u);
}

ParameterShards::Whole::~Whole() {
  if (shards_ != nullptr) shards_->scatter();
}

}  // namespace reprise::nn
