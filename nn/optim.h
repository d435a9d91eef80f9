#pragma once
// Optimizers, gradient clipping and the learning-rate schedule.
//
// Updates run under NoGradGuard, in place on the parameters (bumping their
// storage versions), one parameter after another, each element by one
// thread: the result does not depend on the thread count. Optimizer state
// is f32, stored as MemoryKind::optimizer_state, and is exported and
// imported as named tensors for training checkpoints:
//   "<param name>.exp_avg", "<param name>.exp_avg_sq", "<param name>.step"
//   (AdamW; the step is that parameter's own count, an i64 scalar),
//   "<param name>.momentum_buffer" (SGD with momentum, once the parameter
//   has taken a step),
//   "step" (i64 scalar, the number of step() calls).
// A parameter without a gradient is skipped by step(), and its state does
// not advance (as in PyTorch).

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"

namespace reprise::nn {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // One update from the parameters' current gradients.
  virtual void step() = 0;
  // Drops every parameter's gradient.
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  int64_t steps() const { return steps_; }
  const std::vector<NamedParameter>& params() const { return params_; }

  // The state as named tensors (copies), in parameter order, "step" last.
  virtual std::vector<std::pair<std::string, Tensor>> state() const = 0;
  // Replaces the state. Raises an Error naming the tensor when one is
  // missing, has the wrong shape or dtype, or is not expected.
  virtual void load_state(const std::map<std::string, Tensor>& state) = 0;

 protected:
  Optimizer(std::vector<NamedParameter> params, double lr);

  std::vector<NamedParameter> params_;
  double lr_;
  int64_t steps_ = 0;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  // Decay every parameter, also those with NamedParameter::decay false
  // (norm weights, embeddings).
  bool decay_all = false;
};

// Optimizer state split over the processes of a data-parallel run (ZeRO-1:
// nn::Trainer when its TrainGroup shards the optimizer). Each parameter's
// state lives on one process, its owner, which alone updates the parameter
// and then sends the new values to the others; so each process holds about
// 1/R of the state. The update of an element is the same arithmetic
// wherever it runs, so a sharded run has the bits of an unsharded one.
struct OptimizerShard {
  static constexpr int kLocal = -1;  // a parameter only this process holds (an expert)
  int rank = 0;
  // Per parameter: its owner's rank, or kLocal.
  std::vector<int> owner;
  // Every process's t <- root's. Collective: every process calls it for the
  // same tensors in the same order.
  std::function<void(Tensor& t, int root)> broadcast;

  // Owners that balance the elements: each shared parameter in turn goes
  // to the process owning the fewest elements so far (ties: the lowest
  // rank), the same on every process; `local` ones stay kLocal.
  static OptimizerShard balanced(const std::vector<NamedParameter>& params,
                                 const std::vector<bool>& local, int rank, int ranks,
                                 std::function<void(Tensor& t, int root)> broadcast);
  // Whether this process keeps parameter i's state.
  bool keeps(size_t i) const { return owner[i] == kLocal || owner[i] == rank; }
};

// torch.optim.AdamW: with g the gradient and t the step (from 1),
//   p <- p (1 - lr wd)                      (decoupled; only decayed params)
//   m <- m + (1 - b1) (g - m)
//   v <- b2 v + (1 - b2) g^2
//   p <- p - (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// in PyTorch's order of operations, in f32 with the scalars from f64.
//
// With a shard, each process keeps and updates its own parameters' state
// (OptimizerShard), step() then sends every updated shared parameter from
// its owner, and state() and load_state() still take the whole state, as
// one process has it: state() gathers it from the owners (collective: every
// process calls it), load_state() keeps this process's part.
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<NamedParameter> params, AdamWOptions options = {},
        std::optional<OptimizerShard> shard = {});
  void step() override;
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::map<std::string, Tensor>& state) override;
  const AdamWOptions& options() const { return options_; }
  const std::optional<OptimizerShard>& shard() const { return shard_; }

 private:
  bool keeps(size_t i) const { return !shard_ || shard_->keeps(i); }

  AdamWOptions options_;
  std::optional<OptimizerShard> shard_;
  // Per parameter, its shape; undefined where another process owns it.
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  std::vector<int64_t> param_steps_;  // steps taken by each parameter (every process counts)
};

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2, added to the gradient (coupled), as torch.optim.SGD
  bool nesterov = false;
};

// torch.optim.SGD: g <- g + wd p; with momentum, b <- g on a parameter's
// first step, else b <- momentum b + (1 - dampening) g, and g <- b
// (g + momentum b with nesterov); p <- p - lr g.
class SGD : public Optimizer {
 public:
  SGD(std::vector<NamedParameter> params, SGDOptions options = {});
  void step() override;
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::map<std::string, Tensor>& state) override;
  const SGDOptions& options() const { return options_; }

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_;  // undefined until a parameter's first step
};

// torch.nn.utils.clip_grad_norm_ with the L2 norm: the global norm of all
// gradients (parameters without one are skipped) is returned, and when it
// exceeds max_norm every gradient is scaled by max_norm / (norm + 1e-6).
// The norm is summed in f64 in a fixed order.
double clip_grad_norm(const std::vector<NamedParameter>& params, double max_norm);
// clip_grad_norm's two halves, for gradients that several processes hold
// (nn::Trainer with experts split over processes): the f64 sums of squares
// of p's gradient over its fixed 4096-element chunks, in order (empty
// without a gradient), which summed in order over every parameter give the
// squared norm; and the scaling by max_norm / (norm + 1e-6) when below 1.
std::vector<double> grad_square_sums(const NamedParameter& p);
void scale_grads(const std::vector<NamedParameter>& params, double norm, double max_norm);

// Linear warmup to max_lr, then cosine decay to min_lr:
//   step < warmup:           max_lr (step + 1) / warmup
//   warmup <= step < total:  min_lr + (max_lr - min_lr) (1 + cos(pi r)) / 2,
//                            r = (step - warmup) / (total - warmup)
//   step >= total:           min_lr
// step counts from 0.
struct CosineSchedule {
  double max_lr = 1e-3;
  double min_lr = 1e-4;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double lr(int64_t step) const;
};

}  // namespace reprise::nn
