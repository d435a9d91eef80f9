#include "nn/optim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>
#include <unordered_map>

#include "engine/backend.h"
#include "engine/grad_mode.h"

namespace reprise::nn {
namespace {

void check_params(const std::vector<NamedParameter>& params, const char* who) {
  for (const NamedParameter& p : params) {
    REPRISE_CHECK(p.value.defined() && p.value.dtype() == DType::f32 && p.value.is_contiguous() &&
                      p.value.is_leaf(),
                  who, ": parameter '", p.name, "' must be a contiguous f32 leaf, got ",
                  p.value.defined() ? p.value.describe() : std::string("an undefined tensor"));
  }
}

Tensor state_zeros(const Tensor& like) {
  Tensor t = Tensor::zeros(like.shape(), DType::f32, like.device());
  t.storage()->set_kind(MemoryKind::optimizer_state);
  return t;
}

// The gradient of p as a contiguous f32 tensor matching p, or undefined.
Tensor grad_of(const NamedParameter& p, const char* who) {
  Tensor g = p.value.grad();
  if (!g.defined()) return g;
  REPRISE_CHECK(
      g.dtype() == DType::f32 && g.shape() == p.value.shape() && g.device() == p.value.device(),
      who, ": gradient ", g.describe(), " of '", p.name, "' does not match ", p.value.describe());
  return g.contiguous();
}

// A copy of `src` into `dst` (same shape, f32), for load_state.
void load_into(Tensor& dst, const std::map<std::string, Tensor>& state, const std::string& key,
               const char* who) {
  auto it = state.find(key);
  REPRISE_CHECK(it != state.end(), who, "::load_state: missing tensor '", key, "'");
  REPRISE_CHECK(it->second.dtype() == DType::f32 && it->second.shape() == dst.shape(), who,
                "::load_state: '", key, "' is ", it->second.describe(), ", expected ",
                dst.describe());
  dst.copy_(it->second);
}

int64_t read_step(const std::map<std::string, Tensor>& state, const std::string& key,
                  const char* who) {
  auto it = state.find(key);
  REPRISE_CHECK(it != state.end(), who, "::load_state: missing tensor '", key, "'");
  REPRISE_CHECK(it->second.dtype() == DType::i64 && it->second.numel() == 1, who, "::load_state: '",
                key, "' must be an i64 scalar, got ", it->second.describe());
  int64_t v = it->second.item<int64_t>();
  REPRISE_CHECK(v >= 0, who, "::load_state: '", key, "' is negative (", v, ")");
  return v;
}

Tensor step_tensor(int64_t v) { return Tensor::from_vector<int64_t>({v}, {}); }

// Raises when `state` holds a name not in `expected`.
void check_no_extra(const std::map<std::string, Tensor>& state,
                    const std::vector<std::string>& expected, const char* who) {
  for (const auto& [name, t] : state) {
    bool known = false;
    for (const std::string& e : expected) known = known || e == name;
    REPRISE_CHECK(known, who, "::load_state: unexpected tensor '", name, "'");
  }
}

}  // namespace

// ---- Optimizer --------------------------------------------------------------

Optimizer::Optimizer(std::vector<NamedParameter> params, double lr)
    : params_(std::move(params)), lr_(lr) {}

void Optimizer::zero_grad() {
  for (NamedParameter& p : params_) p.value.set_grad(Tensor());
}

// ---- AdamW ------------------------------------------------------------------

AdamW::AdamW(std::vector<NamedParameter> params, AdamWOptions options,
             std::optional<OptimizerShard> shard)
    : Optimizer(std::move(params), options.lr), options_(options), shard_(std::move(shard)) {
  check_params(params_, "AdamW");
  REPRISE_CHECK(options.lr >= 0 && options.eps >= 0 && options.weight_decay >= 0 &&
                    options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 &&
                    options.beta2 < 1,
                "AdamW: bad options lr ", options.lr, ", betas (", options.beta1, ", ",
                options.beta2, "), eps ", options.eps, ", weight_decay ", options.weight_decay);
  shared_index_.assign(params_.size(), -1);
  if (shard_) {
    REPRISE_CHECK(shard_->all_gather, "AdamW: a shard without an all_gather");
    REPRISE_CHECK(shard_->param_blocks.empty() ||
                      shard_->param_blocks.size() == shard_->layout.buckets.size(),
                  "AdamW: ", shard_->param_blocks.size(), " parameter blocks for ",
                  shard_->layout.buckets.size(), " buckets");
    std::unordered_map<const TensorImpl*, size_t> index;
    for (size_t i = 0; i < params_.size(); ++i) index[params_[i].value.impl()] = i;
    const std::vector<NamedParameter>& shared = shard_->layout.params;
    for (size_t k = 0; k < shared.size(); ++k) {
      const auto it = index.find(shared[k].value.impl());
      REPRISE_CHECK(it != index.end(), "AdamW: the shard's parameter '", shared[k].name,
                    "' is not one of the optimizer's");
      shared_index_[it->second] = int64_t(k);
      shared_param_.push_back(it->second);
    }
    pieces_ = shard_->layout.pieces(shard_->rank);
    for (const ShardLayout::Bucket& b : shard_->layout.buckets) {
      block_avg_.push_back(state_zeros(Tensor::empty({b.block}, DType::f32, shard_device())));
      block_avg_sq_.push_back(state_zeros(block_avg_.back()));
    }
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const bool own = shared_index_[i] < 0;
    exp_avg_.push_back(own ? state_zeros(params_[i].value) : Tensor());
    exp_avg_sq_.push_back(own ? state_zeros(params_[i].value) : Tensor());
    param_steps_.push_back(0);
  }
}

void AdamW::update(size_t i, const Tensor& w, const Tensor& g, const Tensor& m, const Tensor& v) {
  const AdamWOptions& o = options_;
  const int64_t t = param_steps_[i];
  // Scalars as PyTorch forms them: Python floats (f64), applied in f32.
  const double bc1 = 1.0 - std::pow(o.beta1, double(t));
  backend_of(w).adamw_step(w, g, m, v,
                           {.decay = o.weight_decay != 0 && (params_[i].decay || o.decay_all),
                            .shrink = float(1.0 - lr_ * o.weight_decay),
                            .w1 = float(1.0 - o.beta1),
                            .b2 = float(o.beta2),
                            .w2 = float(1.0 - o.beta2),
                            .neg_step = float(-(lr_ / bc1)),
                            .bc2_sqrt = float(std::sqrt(1.0 - std::pow(o.beta2, double(t)))),
                            .eps = float(o.eps)});
  w.storage()->bump_version();
}

void AdamW::step() {
  REPRISE_CHECK(!shard_, "AdamW::step: a sharded AdamW steps on its gradient blocks");
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = grad_of(params_[i], "AdamW");
    if (!g.defined()) continue;
    ++param_steps_[i];
    update(i, params_[i].value, g, exp_avg_[i], exp_avg_sq_[i]);
  }
  ++steps_;
}

void AdamW::step(const ShardGradients& gradients) {
  REPRISE_CHECK(shard_, "AdamW::step: gradient blocks for an AdamW without a shard");
  const ShardLayout& layout = shard_->layout;
  REPRISE_CHECK(gradients.blocks.size() == layout.buckets.size() &&
                    gradients.present.size() == layout.params.size(),
                "AdamW::step: ", gradients.blocks.size(), " gradient blocks and ",
                gradients.present.size(), " presence flags for a layout of ", layout.buckets.size(),
                " buckets and ", layout.params.size(), " parameters");
  const bool split_parameters = !shard_->param_blocks.empty();
  NoGradGuard no_grad;
  // Every process counts every parameter's steps; it updates its own
  // parameters whole and its pieces of the shared ones.
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t k = shared_index_[i];
    if (k >= 0) {
      param_steps_[i] += gradients.present[size_t(k)] ? 1 : 0;
      continue;
    }
    const Tensor g = grad_of(params_[i], "AdamW");
    if (!g.defined()) continue;
    ++param_steps_[i];
    update(i, params_[i].value, g, exp_avg_[i], exp_avg_sq_[i]);
  }
  for (const ShardLayout::Piece& piece : pieces_) {
    if (!gradients.present[piece.param]) continue;
    const Tensor& block = gradients.blocks[piece.bucket];
    REPRISE_CHECK(block.defined() && block.numel() == layout.buckets[piece.bucket].block,
                  "AdamW::step: gradient block ", piece.bucket, " is ",
                  block.defined() ? block.describe() : std::string("undefined"), ", expected ",
                  layout.buckets[piece.bucket].block, " elements");
    const Tensor w = split_parameters ? piece.in_block(shard_->param_blocks[piece.bucket])
                                      : piece.in_param(layout.params[piece.param].value);
    update(shared_param_[piece.param], w, piece.in_block(block),
           piece.in_block(block_avg_[piece.bucket]), piece.in_block(block_avg_sq_[piece.bucket]));
  }
  if (split_parameters) {
    gather_seconds_ = 0;
    ++steps_;
    return;
  }
  // Every process's pieces to every process, bucket by bucket (those with
  // an updated parameter; every process knows which from the flags).
  const auto gather_start = std::chrono::steady_clock::now();
  for (size_t b = 0; b < layout.buckets.size(); ++b) {
    const ShardLayout::Bucket& bucket = layout.buckets[b];
    bool updated = false;
    for (const size_t k : bucket.params) updated = updated || gradients.present[k];
    if (!updated) continue;
    Tensor mine = Tensor::zeros({bucket.block}, DType::f32, shard_device());
    for (const ShardLayout::Piece& piece : pieces_) {
      if (piece.bucket == b)
        piece.in_block(mine).copy_(piece.in_param(layout.params[piece.param].value));
    }
    const Tensor whole = gather_bucket(b, mine);
    for (size_t j = 0; j < bucket.params.size(); ++j) {
      if (!gradients.present[bucket.params[j]]) continue;
      Tensor w = layout.params[bucket.params[j]].value;
      w.copy_(layout.in_bucket(whole, b, j));
    }
  }
  gather_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - gather_start).count();
  ++steps_;
}

Device AdamW::shard_device() const {
  const std::vector<NamedParameter>& shared = shard_->layout.params;
  return shared.empty() ? Device::cpu() : shared.front().value.device();
}

Tensor AdamW::gather_bucket(size_t b, const Tensor& block) const {
  const ShardLayout::Bucket& bucket = shard_->layout.buckets[b];
  const Tensor all = shard_->all_gather(block);  // (R, m)
  REPRISE_CHECK(all.numel() == bucket.elements(), "AdamW: the all-gather of bucket ", b, " gave ",
                all.describe(), ", expected ", bucket.ranks, " blocks of ", bucket.block);
  return all.view({bucket.elements()});
}

std::vector<std::vector<double>> AdamW::square_sums(const ShardGradients& gradients) const {
  REPRISE_CHECK(shard_ && gradients.present.size() == shard_->layout.params.size(),
                "AdamW::square_sums: gradient blocks for ", gradients.present.size(),
                " shared parameters, the shard has ",
                shard_ ? shard_->layout.params.size() : size_t(0));
  std::vector<std::vector<double>> out(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t k = shared_index_[i];
    if (k < 0) {
      out[i] = grad_square_sums(params_[i]);
    } else if (gradients.present[size_t(k)]) {
      const int64_t n = params_[i].value.numel();
      out[i].assign(size_t((n + kGradNormChunk - 1) / kGradNormChunk), 0.0);
    }
  }
  // A piece starts on a chunk boundary of its parameter (the layout's
  // alignment), so its chunks are the parameter's.
  for (const ShardLayout::Piece& piece : pieces_) {
    std::vector<double>& sums = out[shared_param_[piece.param]];
    if (sums.empty()) continue;
    const Tensor g = piece.in_block(gradients.blocks[piece.bucket]);
    const std::vector<double> mine = backend_of(g).chunk_square_sums(g).to_vector<double>();
    std::copy(mine.begin(), mine.end(), sums.begin() + piece.begin / kGradNormChunk);
  }
  return out;
}

int64_t AdamW::kept_elements() const {
  int64_t n = 0;
  for (const Tensor& t : exp_avg_) n += t.defined() ? t.numel() : 0;
  for (const Tensor& t : block_avg_) n += t.numel();
  return n;
}

std::vector<std::pair<std::string, Tensor>> AdamW::state() const {
  // The shared parameters' moments, whole, from every process's blocks.
  std::vector<Tensor> avg(params_.size()), avg_sq(params_.size());
  if (shard_) {
    const ShardLayout& layout = shard_->layout;
    for (size_t b = 0; b < layout.buckets.size(); ++b) {
      const Tensor whole_avg = gather_bucket(b, block_avg_[b]);
      const Tensor whole_sq = gather_bucket(b, block_avg_sq_[b]);
      for (size_t j = 0; j < layout.buckets[b].params.size(); ++j) {
        const size_t i = shared_param_[layout.buckets[b].params[j]];
        avg[i] = layout.in_bucket(whole_avg, b, j).clone();
        avg_sq[i] = layout.in_bucket(whole_sq, b, j).clone();
      }
    }
  }
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const bool own = shared_index_[i] < 0;
    out.emplace_back(params_[i].name + ".exp_avg", own ? exp_avg_[i].clone() : avg[i]);
    out.emplace_back(params_[i].name + ".exp_avg_sq", own ? exp_avg_sq_[i].clone() : avg_sq[i]);
    out.emplace_back(params_[i].name + ".step", step_tensor(param_steps_[i]));
  }
  out.emplace_back("step", step_tensor(steps_));
  return out;
}

std::vector<AdamW::MomentSlice> AdamW::kept_moments() const {
  std::vector<int64_t> piece_of(params_.size(), -1);  // per parameter, its piece here
  for (size_t j = 0; j < pieces_.size(); ++j)
    piece_of[shared_param_[pieces_[j].param]] = int64_t(j);
  std::vector<MomentSlice> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].name;
    const int64_t numel = params_[i].value.numel();
    if (shared_index_[i] < 0) {
      out.push_back({name, 0, numel, numel, exp_avg_[i].view({-1}), exp_avg_sq_[i].view({-1})});
    } else if (piece_of[i] >= 0) {
      const ShardLayout::Piece& piece = pieces_[size_t(piece_of[i])];
      out.push_back({name, piece.begin, piece.end, numel, piece.in_block(block_avg_[piece.bucket]),
                     piece.in_block(block_avg_sq_[piece.bucket])});
    }
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> AdamW::step_counts() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < params_.size(); ++i)
    out.emplace_back(params_[i].name + ".step", step_tensor(param_steps_[i]));
  out.emplace_back("step", step_tensor(steps_));
  return out;
}

AdamW::ReadState AdamW::read_state(const std::map<std::string, Tensor>& steps,
                                   const MomentReader& moments) const {
  std::vector<std::string> expected{"step"};
  for (const NamedParameter& p : params_) expected.push_back(p.name + ".step");
  check_no_extra(steps, expected, "AdamW");
  ReadState s;
  for (const NamedParameter& p : params_)
    s.param_steps.push_back(read_step(steps, p.name + ".step", "AdamW"));
  s.steps = read_step(steps, "step", "AdamW");
  // Elements [begin, end) of `key` into dst (1-D, end - begin).
  const auto read = [&](Tensor dst, const std::string& key, int64_t begin, int64_t end) {
    const Tensor src = moments(key, begin, end);
    REPRISE_CHECK(src.dtype() == DType::f32 && src.dim() == 1 && src.numel() == end - begin,
                  "AdamW::load_state: elements [", begin, ", ", end, ") of '", key, "' came as ",
                  src.describe());
    dst.copy_(src.device() == dst.device() ? src : src.to(dst.device()));
  };
  for (size_t i = 0; i < params_.size(); ++i) {
    const bool own = shared_index_[i] < 0;
    s.exp_avg.push_back(own ? state_zeros(params_[i].value) : Tensor());
    s.exp_avg_sq.push_back(own ? state_zeros(params_[i].value) : Tensor());
    if (!own) continue;  // below, by pieces
    const int64_t n = params_[i].value.numel();
    read(s.exp_avg.back().view({-1}), params_[i].name + ".exp_avg", 0, n);
    read(s.exp_avg_sq.back().view({-1}), params_[i].name + ".exp_avg_sq", 0, n);
  }
  for (const Tensor& block : block_avg_) {
    s.block_avg.push_back(state_zeros(block));
    s.block_avg_sq.push_back(state_zeros(block));
  }
  for (const ShardLayout::Piece& piece : pieces_) {
    const std::string& name = shard_->layout.params[piece.param].name;
    read(piece.in_block(s.block_avg[piece.bucket]), name + ".exp_avg", piece.begin, piece.end);
    read(piece.in_block(s.block_avg_sq[piece.bucket]), name + ".exp_avg_sq", piece.begin,
         piece.end);
  }
  return s;
}

void AdamW::install(ReadState state) {
  REPRISE_CHECK(state.param_steps.size() == params_.size() &&
                    state.exp_avg.size() == params_.size() &&
                    state.block_avg.size() == block_avg_.size(),
                "AdamW::install: a state read for another optimizer (", state.param_steps.size(),
                " parameters and ", state.block_avg.size(), " blocks; this one has ",
                params_.size(), " and ", block_avg_.size(), ")");
  exp_avg_ = std::move(state.exp_avg);
  exp_avg_sq_ = std::move(state.exp_avg_sq);
  block_avg_ = std::move(state.block_avg);
  block_avg_sq_ = std::move(state.block_avg_sq);
  param_steps_ = std::move(state.param_steps);
  steps_ = state.steps;
}

AdamW::ReadState AdamW::read_state(const std::map<std::string, Tensor>& state) const {
  std::vector<std::string> expected{"step"};
  for (const NamedParameter& p : params_) {
    for (const char* s : {".exp_avg", ".exp_avg_sq", ".step"}) expected.push_back(p.name + s);
  }
  check_no_extra(state, expected, "AdamW");
  // The whole moments, each of its parameter's shape; the other
  // read_state checks the rest.
  std::map<std::string, Tensor> steps;
  for (const NamedParameter& p : params_) {
    for (const char* s : {".exp_avg", ".exp_avg_sq"}) {
      const auto it = state.find(p.name + s);
      REPRISE_CHECK(it != state.end(), "AdamW::load_state: missing tensor '", p.name + s, "'");
      REPRISE_CHECK(it->second.dtype() == DType::f32 && it->second.shape() == p.value.shape(),
                    "AdamW::load_state: '", p.name + s, "' is ", it->second.describe(),
                    ", expected ", p.value.describe());
    }
    if (const auto it = state.find(p.name + ".step"); it != state.end()) steps.insert(*it);
  }
  if (const auto it = state.find("step"); it != state.end()) steps.insert(*it);
  return read_state(steps, [&](const std::string& key, int64_t begin, int64_t end) {
    return state.at(key).contiguous().view({-1}).slice(0, begin, end);
  });
}

void AdamW::load_state(const std::map<std::string, Tensor>& state) { install(read_state(state)); }

// ---- SGD --------------------------------------------------------------------

SGD::SGD(std::vector<NamedParameter> params, SGDOptions options)
    : Optimizer(std::move(params), options.lr), options_(options) {
  check_params(params_, "SGD");
  REPRISE_CHECK(options.lr >= 0 && options.momentum >= 0 && options.weight_decay >= 0 &&
                    (!options.nesterov || (options.momentum > 0 && options.dampening == 0)),
                "SGD: bad options lr ", options.lr, ", momentum ", options.momentum, ", dampening ",
                options.dampening, ", weight_decay ", options.weight_decay,
                options.nesterov ? " (nesterov needs momentum > 0 and dampening 0)" : "");
  momentum_.resize(params_.size());
}

void SGD::step() {
  NoGradGuard no_grad;
  const SGDOptions& o = options_;
  const float wd = float(o.weight_decay), mu = float(o.momentum);
  const float keep = float(1.0 - o.dampening), neg_lr = float(-lr_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const NamedParameter& p = params_[i];
    const Tensor g = grad_of(p, "SGD");
    if (!g.defined()) continue;
    const bool first = o.momentum != 0 && !momentum_[i].defined();
    if (first) momentum_[i] = state_zeros(p.value);
    backend_of(p.value).sgd_step(p.value, g, momentum_[i],
                                 {.wd = wd,
                                  .mu = mu,
                                  .keep = keep,
                                  .neg_lr = neg_lr,
                                  .momentum = o.momentum != 0,
                                  .first = first,
                                  .nesterov = o.nesterov});
    p.value.storage()->bump_version();
  }
  ++steps_;
}

std::vector<std::pair<std::string, Tensor>> SGD::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (momentum_[i].defined()) {
      out.emplace_back(params_[i].name + ".momentum_buffer", momentum_[i].clone());
    }
  }
  out.emplace_back("step", step_tensor(steps_));
  return out;
}

void SGD::load_state(const std::map<std::string, Tensor>& state) {
  std::vector<std::string> expected{"step"};
  for (const NamedParameter& p : params_) expected.push_back(p.name + ".momentum_buffer");
  check_no_extra(state, expected, "SGD");
  int64_t total = read_step(state, "step", "SGD");
  for (const NamedParameter& p : params_) {
    const auto it = state.find(p.name + ".momentum_buffer");
    if (it == state.end()) continue;  // that parameter has not taken a step
    REPRISE_CHECK(it->second.dtype() == DType::f32 && it->second.shape() == p.value.shape(),
                  "SGD::load_state: '", it->first, "' is ", it->second.describe(), ", expected ",
                  p.value.describe());
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string key = params_[i].name + ".momentum_buffer";
    if (state.count(key) == 0) {
      momentum_[i] = Tensor();
      continue;
    }
    momentum_[i] = state_zeros(params_[i].value);
    load_into(momentum_[i], state, key, "SGD");
  }
  steps_ = total;
}

// ---- clipping and schedule --------------------------------------------------

std::vector<double> grad_square_sums(const NamedParameter& p) {
  const Tensor g = grad_of(p, "clip_grad_norm");
  if (!g.defined()) return {};
  return backend_of(g).chunk_square_sums(g).to_vector<double>();
}

void scale_blocks(std::vector<Tensor>& blocks, double norm, double max_norm) {
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return;
  NoGradGuard no_grad;
  for (Tensor& g : blocks) {
    if (!g.defined()) continue;
    backend_of(g).scale_(g, coef);
    g.storage()->bump_version();
  }
}

void scale_grads(const std::vector<NamedParameter>& params, double norm, double max_norm) {
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return;
  NoGradGuard no_grad;
  for (const NamedParameter& p : params) {
    Tensor g = grad_of(p, "clip_grad_norm");
    if (!g.defined()) continue;
    backend_of(g).scale_(g, coef);
    g.storage()->bump_version();
    Tensor owner = p.value;  // a handle; set_grad is not const
    if (!g.is_same(owner.grad())) owner.set_grad(g);
  }
}

double clip_grad_norm(const std::vector<NamedParameter>& params, double max_norm) {
  REPRISE_CHECK(max_norm >= 0, "clip_grad_norm: max_norm must be >= 0, got ", max_norm);
  // Sums of squares in f64 over fixed 4096-element chunks of each gradient,
  // added in order: the same bits for any thread count.
  double total = 0;
  for (const NamedParameter& p : params) {
    for (double s : grad_square_sums(p)) total += s;
  }
  const double norm = std::sqrt(total);
  scale_grads(params, norm, max_norm);
  return norm;
}

double CosineSchedule::lr(int64_t step) const {
  if (step < warmup_steps) return max_lr * double(step + 1) / double(warmup_steps);
  if (step >= total_steps) return min_lr;
  const double r = double(step - warmup_steps) / double(total_steps - warmup_steps);
  return min_lr + (max_lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * r));
}

}  // namespace reprise::nn
