#include "nn/optim.h"

#include <algorithm>
#include <cmath>
#include <numbers>

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

OptimizerShard OptimizerShard::balanced(const std::vector<NamedParameter>& params,
                                        const std::vector<bool>& local, int rank, int ranks,
                                        std::function<void(Tensor& t, int root)> broadcast) {
  REPRISE_CHECK(ranks >= 1 && rank >= 0 && rank < ranks && local.size() == params.size(),
                "OptimizerShard: rank ", rank, " of ", ranks, ", ", local.size(),
                " locality flags for ", params.size(), " parameters");
  OptimizerShard s{.rank = rank, .owner = {}, .broadcast = std::move(broadcast)};
  std::vector<int64_t> load(size_t(ranks), 0);
  for (size_t i = 0; i < params.size(); ++i) {
    if (local[i]) {
      s.owner.push_back(kLocal);
      continue;
    }
    const int r = int(std::min_element(load.begin(), load.end()) - load.begin());
    load[size_t(r)] += params[i].value.numel();
    s.owner.push_back(r);
  }
  return s;
}

AdamW::AdamW(std::vector<NamedParameter> params, AdamWOptions options,
             std::optional<OptimizerShard> shard)
    : Optimizer(std::move(params), options.lr), options_(options), shard_(std::move(shard)) {
  check_params(params_, "AdamW");
  REPRISE_CHECK(options.lr >= 0 && options.eps >= 0 && options.weight_decay >= 0 &&
                    options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 &&
                    options.beta2 < 1,
                "AdamW: bad options lr ", options.lr, ", betas (", options.beta1, ", ",
                options.beta2, "), eps ", options.eps, ", weight_decay ", options.weight_decay);
  REPRISE_CHECK(!shard_ || (shard_->owner.size() == params_.size() && shard_->broadcast),
                "AdamW: a shard of ", shard_ ? shard_->owner.size() : 0, " owners for ",
                params_.size(), " parameters");
  for (size_t i = 0; i < params_.size(); ++i) {
    exp_avg_.push_back(keeps(i) ? state_zeros(params_[i].value) : Tensor());
    exp_avg_sq_.push_back(keeps(i) ? state_zeros(params_[i].value) : Tensor());
    param_steps_.push_back(0);
  }
}

void AdamW::step() {
  NoGradGuard no_grad;
  const AdamWOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const NamedParameter& p = params_[i];
    const Tensor g = grad_of(p, "AdamW");
    if (!g.defined()) continue;
    const int64_t t = ++param_steps_[i];
    if (!keeps(i)) continue;  // its owner updates it and sends it below
    // Scalars as PyTorch forms them: Python floats (f64), applied in f32.
    const bool decay = o.weight_decay != 0 && (p.decay || o.decay_all);
    const float shrink = float(1.0 - lr_ * o.weight_decay);
    const float w1 = float(1.0 - o.beta1);
    const float b2 = float(o.beta2), w2 = float(1.0 - o.beta2);
    const double bc1 = 1.0 - std::pow(o.beta1, double(t));
    const float neg_step = float(-(lr_ / bc1));
    const float bc2_sqrt = float(std::sqrt(1.0 - std::pow(o.beta2, double(t))));
    const float eps = float(o.eps);
    backend_of(p.value).adamw_step(p.value, g, exp_avg_[i], exp_avg_sq_[i],
                                   {.decay = decay,
                                    .shrink = shrink,
                                    .w1 = w1,
                                    .b2 = b2,
                                    .w2 = w2,
                                    .neg_step = neg_step,
                                    .bc2_sqrt = bc2_sqrt,
                                    .eps = eps});
    p.value.storage()->bump_version();
  }
  if (shard_) {
    // Every process has the same gradients (reduced), so all send the same
    // parameters in the same order.
    for (size_t i = 0; i < params_.size(); ++i) {
      if (shard_->owner[i] == OptimizerShard::kLocal || !params_[i].value.grad().defined())
        continue;
      Tensor value = params_[i].value;
      shard_->broadcast(value, shard_->owner[i]);
    }
  }
  ++steps_;
}

std::vector<std::pair<std::string, Tensor>> AdamW::state() const {
  std::vector<std::pair<std::string, Tensor>> out;
  // A shared parameter's state, from its owner to every process.
  auto gathered = [&](const Tensor& mine, size_t i) {
    if (!shard_ || shard_->owner[i] == OptimizerShard::kLocal) return mine.clone();
    Tensor t = keeps(i)
                   ? mine.clone()
                   : Tensor::zeros(params_[i].value.shape(), DType::f32, params_[i].value.device());
    shard_->broadcast(t, shard_->owner[i]);
    return t;
  };
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back(params_[i].name + ".exp_avg", gathered(exp_avg_[i], i));
    out.emplace_back(params_[i].name + ".exp_avg_sq", gathered(exp_avg_sq_[i], i));
    out.emplace_back(params_[i].name + ".step", step_tensor(param_steps_[i]));
  }
  out.emplace_back("step", step_tensor(steps_));
  return out;
}

void AdamW::load_state(const std::map<std::string, Tensor>& state) {
  std::vector<std::string> expected{"step"};
  for (const NamedParameter& p : params_) {
    for (const char* s : {".exp_avg", ".exp_avg_sq", ".step"}) expected.push_back(p.name + s);
  }
  check_no_extra(state, expected, "AdamW");
  // Check everything before changing anything.
  std::vector<int64_t> steps;
  for (const NamedParameter& p : params_)
    steps.push_back(read_step(state, p.name + ".step", "AdamW"));
  int64_t total = read_step(state, "step", "AdamW");
  for (const NamedParameter& p : params_) {
    for (const char* s : {".exp_avg", ".exp_avg_sq"}) {
      const auto it = state.find(p.name + s);
      REPRISE_CHECK(it != state.end(), "AdamW::load_state: missing tensor '", p.name + s, "'");
      REPRISE_CHECK(it->second.dtype() == DType::f32 && it->second.shape() == p.value.shape(),
                    "AdamW::load_state: '", p.name + s, "' is ", it->second.describe(),
                    ", expected ", p.value.describe());
    }
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!keeps(i)) continue;  // its owner keeps it
    load_into(exp_avg_[i], state, params_[i].name + ".exp_avg", "AdamW");
    load_into(exp_avg_sq_[i], state, params_[i].name + ".exp_avg_sq", "AdamW");
  }
  param_steps_ = steps;
  steps_ = total;
}

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
