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
#include "nn/shard_layout.h"

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

// Optimizer state split over the processes of a data-parallel run (ZeRO-1
// and ZeRO-2: nn::Trainer when its TrainGroup has a shard layout). Each
// process keeps the AdamW state of its blocks of the shared parameters
// (nn/shard_layout.h) and updates those elements only; the updated blocks
// are then all-gathered, so every process holds every parameter again.
// Parameters outside the layout (this process's experts) are its own,
// whole. The update of an element is the same arithmetic wherever it runs,
// so a split run has the bits of an unsplit one.
struct OptimizerShard {
  ShardLayout layout;  // over the processes of the run
  int rank = 0;
  // block: (m) on every process -> (R, m), rank r's at r. Collective: every
  // process calls it for the same buckets in the same order.
  std::function<Tensor(const Tensor& block)> all_gather;
  // With the parameters split too (ZeRO-3, nn/parameter_shards.h): per
  // bucket, this process's block of the parameters (m), which the update
  // writes in place of the parameters, with no all-gather (the next gather
  // of each unit spreads it). Empty otherwise.
  std::vector<Tensor> param_blocks;
};

// torch.optim.AdamW: with g the gradient and t the step (from 1),
//   p <- p (1 - lr wd)                      (decoupled; only decayed params)
//   m <- m + (1 - b1) (g - m)
//   v <- b2 v + (1 - b2) g^2
//   p <- p - (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// in PyTorch's order of operations, in f32 with the scalars from f64.
//
// With a shard, each process keeps and updates its blocks' state
// (OptimizerShard) in step(gradients), which takes this process's blocks
// of the summed gradients (the whole ones of its own parameters are their
// .grad()) and ends with the all-gather. state() and load_state() still
// take the whole state, as one process has it: state() gathers it
// (collective: every process calls it), load_state() keeps this process's
// part. kept_moments() and read_state() save and load each process's part
// alone.
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<NamedParameter> params, AdamWOptions options = {},
        std::optional<OptimizerShard> shard = {});
  // Without a shard.
  void step() override;
  // With one.
  void step(const ShardGradients& gradients);
  std::vector<std::pair<std::string, Tensor>> state() const override;
  void load_state(const std::map<std::string, Tensor>& state) override;
  const AdamWOptions& options() const { return options_; }
  const std::optional<OptimizerShard>& shard() const { return shard_; }

  // The moments this process keeps, for saving them on their own (a
  // checkpoint's per-process files, nn/train_state.h): elements
  // [begin, end) of parameter `param` (flattened; numel elements in all),
  // as 1-D views of the state. Its own parameters are whole, the shared
  // ones are its pieces, in parameter order. Not collective.
  struct MomentSlice {
    std::string param;
    int64_t begin = 0, end = 0, numel = 0;
    Tensor exp_avg, exp_avg_sq;  // (end - begin) f32
  };
  std::vector<MomentSlice> kept_moments() const;
  // state()'s step counts alone: "<param>.step" per parameter, "step" last.
  std::vector<std::pair<std::string, Tensor>> step_counts() const;

  // Elements [begin, end) of moment `key` ("<param>.exp_avg" or
  // "<param>.exp_avg_sq", flattened), as a 1-D f32 tensor; raises an Error
  // when it cannot.
  using MomentReader = std::function<Tensor(const std::string& key, int64_t begin, int64_t end)>;
  // A state read and checked by read_state, for install.
  struct ReadState {
    std::vector<Tensor> exp_avg, exp_avg_sq, block_avg, block_avg_sq;
    std::vector<int64_t> param_steps;
    int64_t steps = 0;
  };
  // Reads the state this process keeps: the step counts from `steps`
  // (step_counts()'s names, nothing else) and the moments, its own
  // parameters' whole and its pieces of the shared ones, from `moments`.
  // Changes nothing; raises an Error naming what is wrong. Whatever layout
  // the moments were saved in, they are read exactly.
  ReadState read_state(const std::map<std::string, Tensor>& steps,
                       const MomentReader& moments) const;
  // read_state of a whole state, as load_state takes it: state()'s
  // entries, each moment of its parameter's shape.
  ReadState read_state(const std::map<std::string, Tensor>& state) const;
  // Puts a state from read_state in place.
  void install(ReadState state);
  // Elements whose state this process keeps (two f32 moments each).
  int64_t kept_elements() const;
  // Seconds the last step(gradients) spent sharing the updated blocks.
  double last_gather_seconds() const { return gather_seconds_; }
  // Whether parameter i is in the shard's layout (its state split).
  bool shared(size_t i) const { return shared_index_[i] >= 0; }
  // With a shard: per parameter, grad_square_sums of its gradient as far
  // as this process holds it: its own parameters' whole, the shared ones'
  // chunks from its blocks and 0 for the chunks other processes hold
  // (empty for a parameter without a gradient). Added over the processes,
  // the shared ones' are one process's.
  std::vector<std::vector<double>> square_sums(const ShardGradients& gradients) const;

 private:
  // Parameter i's update, given its gradient, in place on w with its
  // moments m and v (w, g, m, v: one shape); counts its step.
  void update(size_t i, const Tensor& w, const Tensor& g, const Tensor& m, const Tensor& v);
  Device shard_device() const;  // where the shared parameters are
  // Bucket b's whole buffer (R m) from every process's block (m) of it.
  Tensor gather_bucket(size_t b, const Tensor& block) const;

  AdamWOptions options_;
  std::optional<OptimizerShard> shard_;
  // Per parameter, its shape; undefined for a shared parameter of a shard.
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  std::vector<int64_t> param_steps_;  // steps taken by each parameter (every process counts)
  // With a shard: per bucket, the moments of this process's block (m);
  // the shard's pieces for this process; per parameter its index in the
  // layout (-1 for one of its own), and per shared parameter its index.
  std::vector<Tensor> block_avg_, block_avg_sq_;
  std::vector<ShardLayout::Piece> pieces_;
  std::vector<int64_t> shared_index_;
  std::vector<size_t> shared_param_;
  double gather_seconds_ = 0;
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
// scale_grads' scaling of a shard's gradient blocks (ShardGradients).
void scale_blocks(std::vector<Tensor>& blocks, double norm, double max_norm);

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
