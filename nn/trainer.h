#pragma once
// A training run of the example Llama and how it advances by one step.
//
// A run is a TrainConfig, a dataset and a Trainer. The Trainer holds
// everything that changes from step to step: the model's parameters, the
// AdamW state, one rng::Generator (seeded with config.seed) whose streams
// are "init" (parameter initialisation), "data" (batch sampling: its offset
// is the data position) and "dropout" (every dropout mask), and the step
// count. Nothing else feeds a step: the learning rate is a function of the
// step, kernels do not depend on the thread count, and checkpointed layers
// replay their recorded random numbers. So saving that state after step k
// and loading it into a fresh Trainer gives steps k+1, k+2, ... with the same
// losses, bit for bit, as the run that never stopped (nn/train_state.h
// saves and loads it).
//
// Several processes (nn::TrainGroup, implemented by parallel/) train one
// model together: each step is one global batch of R A B sequences (R
// processes, A = grad_accum micro-batches of B = batch sequences each);
// process r runs micro-batches r A .. r A + A - 1, micro-batch j being
// samples j B .. j B + B - 1. The data and the dropout masks are keyed by
// sample (rng::SampleSlice), so a sample sees the same windows and masks for
// any R and A with the same R A B; each micro-batch's loss is scaled by
// 1 / (R A) before backward, and its gradients are summed over
// micro-batches in order and over processes in rank order. R processes of
// one micro-batch therefore give the bits of one process accumulating R
// micro-batches (R = 1, A = R); a single batch of R A B sequences is the
// same sum associated differently (the mean over all tokens at once, not
// the mean of micro-batch means), equal within rounding.
//
// B = batch, T = sequence length, V = vocabulary (256 bytes, or a
// tokenizer's ids).

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/kernel.h"
#include "nn/checkpointing.h"
#include "nn/data.h"
#include "nn/llama.h"
#include "nn/optim.h"
#include "nn/parameter_shards.h"
#include "nn/shard_layout.h"
#include "nn/train_config.h"

namespace reprise::nn {

// DeepSeek-V3's auxiliary-loss-free balancing of one MoE layer, as
// torchtitan updates its expert_bias after a step (E experts):
//   delta_e = coeff * sign(mean(routed) - routed_e)
//   bias_e += delta_e - mean(delta)
// so underloaded experts' scores rise, overloaded ones' fall, and the mean
// bias stays where it was. routed: (E) the step's assignments per expert,
// summed over micro-batches and processes. In f32 as torchtitan (coeff
// rounded to f32, delta_e - mean and the add in f32), except what it leaves
// to its kernels' summation order: the signs come from the integer counts
// exactly, and mean(delta) = coeff * (n_below - n_above) / E is computed in
// f64 and rounded once to f32. Host arithmetic on integers and a fixed
// sequence of roundings, so every process and device gets the same bits.
// bias: (E) -> the updated (E).
std::vector<float> balance_score_bias(const std::vector<float>& bias,
                                      const std::vector<int64_t>& routed, double coeff);

// The processes that train one model together, as a Trainer sees them;
// parallel/train_group.h implements it over a Communicator. Every call is
// collective: each process makes the same calls in the same order.
class TrainGroup {
 public:
  virtual ~TrainGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Where MoE layers' experts run; nullptr when every process holds all of
  // them (data parallel only).
  virtual std::shared_ptr<const ExpertDispatch> expert_dispatch() const = 0;
  // The parameters every process holds a copy of (all but this process's
  // experts), whose gradients begin_backward / end_backward reduce, and per
  // parameter its unit (its decoder layer, or one past the last for the
  // rest of the model: what ShardMode::parameters gathers together).
  // Called once, with the model built.
  virtual void attach(const std::vector<NamedParameter>& replicated,
                      const std::vector<size_t>& units) = 0;
  // What the processes split (none with one process).
  virtual ShardMode shard_mode() const = 0;
  // Around the backward of a step's last micro-batch: the replicated
  // gradients are summed over the processes, in rank order, while backward
  // runs; after end_backward each holds the sum (undefined where no
  // process had one).
  virtual void begin_backward() = 0;
  virtual void end_backward() = 0;
  // Every process's `values` (one length for all), concatenated in rank order.
  virtual std::vector<double> all_gather(const std::vector<double>& values) = 0;
  // When data parallelism splits the optimizer state (ZeRO-1), and perhaps
  // the gradients (ZeRO-2) and the parameters (ZeRO-3), over the
  // processes: where each process's share of the shared parameters is
  // (valid from attach on); else nullptr.
  virtual const ShardLayout* shard_layout() const = 0;
  // With a shard layout, after end_backward: this process's blocks of the
  // summed gradients (handed over; with ZeRO-1 every gradient also holds
  // its whole sum, with ZeRO-2 and -3 the shared ones are undefined).
  virtual ShardGradients take_gradients() = 0;
  // block: (m) on every process -> (R, m), rank r's at r.
  virtual Tensor all_gather(const Tensor& block) = 0;
  // all_gather of each block in turn, started on a thread and a
  // communicator of the group's own (with the parameters split: their
  // prefetches); the future gives the results. One call is in flight at a
  // time: the caller waits for each before starting the next.
  virtual std::future<std::vector<Tensor>> all_gather_async(std::vector<Tensor> blocks) = 0;
  // Named tensors of every process, in the order one process holding the
  // whole model lists them: the replicated entries once (rank 0's), each
  // process's run of expert entries (is_expert_parameter, when experts are
  // split) spliced in rank order where the run stands. Every process gets
  // the list when `everyone`, else rank 0 alone (the others get none).
  virtual std::vector<std::pair<std::string, Tensor>> gather_named(
      const std::vector<std::pair<std::string, Tensor>>& local, bool everyone) = 0;
};

// What a step does when its loss or its gradient norm is NaN or infinite:
// `stop` raises an Error naming the step, before any update; `skip` drops
// the step's update (no optimizer step, gradients zeroed) and the run goes
// on with the next batch (the step still counts: the schedule and the data
// move on). Either way such a step changes neither the parameters nor the
// optimizer state.
enum class OnNonFinite { stop, skip };
// "stop" | "skip"; raises an Error for anything else.
OnNonFinite parse_on_nonfinite(const std::string& name);
const char* on_nonfinite_name(OnNonFinite on);

// The kernels a training run of `model` may call: every row but the MoE
// routing's for a dense model. A Trainer asks its device's backend for
// them before it builds anything (Backend::require).
KernelSet training_kernels(const LlamaConfig& model);

class Trainer {
 public:
  // Builds the model (initialised from stream "init" of the run's
  // generator), AdamW (weight decay on the projection and head weights
  // only) and the cosine schedule, and sets the checkpoint policy. With a
  // `group` this process is one of several (its rank's share of every
  // global batch, and of the experts when the group splits them).
  // On another `device` than the CPU the model, its gradients and the
  // optimizer state live there and each batch is copied there; checkpoints
  // are the same files (written from and read into the device).
  Trainer(TrainConfig config, std::shared_ptr<const TextDataset> data,
          std::shared_ptr<TrainGroup> group = nullptr, Device device = Device::cpu());

  struct StepStats {
    int64_t step = 0;  // the step just taken, from 1
    float loss = 0;    // of the global batch, before the update: the mean over micro-batches and
                       // processes of causal_lm_loss (with an MoE, the router losses included)
    double lr = 0;
    double grad_norm = 0;  // before clipping, over every process's gradients
    int64_t tokens = 0;    // R A B T, the global batch
    double seconds = 0;
    int64_t peak_saved_activation = 0;  // bytes, during the step
    int64_t peak_total = 0;             // bytes, during the step
    // The step's router terms per MoE layer, summed over micro-batches and
    // processes (for the log).
    std::vector<MoeRouterTerms> moe;
    // The loss or the gradient norm was not finite and the update was
    // dropped (OnNonFinite::skip).
    bool skipped = false;
    // With the optimizer split over processes: seconds this process spent
    // all-gathering parameters (the update's; with the parameters split,
    // every unit's gathers for forward and backward), and the bytes it
    // received in those gathers (parameters split only).
    double gather_seconds = 0;
    int64_t gathered_bytes = 0;
  };
  // Called after backward (of the last micro-batch, and the gradient
  // reduction), before clipping and the optimizer update, with that
  // micro-batch, the forward's output (logits (B, T, V), MoE terms) and
  // its loss.
  using AfterBackward =
      std::function<void(const Batch& batch, const CausalLMOutput& out, const Tensor& loss)>;

  // One optimizer step on the next training batch; with a non-finite loss or
  // gradient norm, what on_nonfinite() says. With the model's
  // load_balance_coeff set, an applied step then moves each MoE layer's
  // e_score_correction_bias toward balance (balance_score_bias) by the
  // step's routed counts (StepStats::moe), on every process alike.
  StepStats step(const AfterBackward& after_backward = {});
  void set_on_nonfinite(OnNonFinite on) { on_nonfinite_ = on; }
  OnNonFinite on_nonfinite() const { return on_nonfinite_; }

  // Mean loss over held-out batches 0 .. batches - 1 of B windows (clamped
  // to what the held-out part holds), in eval mode without grad: no
  // dropout, and no random numbers drawn, so evaluating does not change the
  // run. Processes share the batches (batch j on rank j mod R) and the
  // result is the sum one process would make, in batch order.
  double evaluate(int64_t batches);

  // Applies the "how it is computed" part of `config` (its checkpointing);
  // the rest must equal the run's.
  void set_compute_options(const TrainConfig& config);
  // The checkpointing the model's layers run under.
  const LayerCheckpointing& checkpointing() const { return *checkpointing_; }

  const TrainConfig& config() const { return config_; }
  const TextDataset& data() const { return *data_; }
  LlamaForCausalLM& model() { return *model_; }
  const LlamaForCausalLM& model() const { return *model_; }
  AdamW& optimizer() { return *optimizer_; }
  const AdamW& optimizer() const { return *optimizer_; }
  rng::Generator& generator() { return *generator_; }
  const rng::Generator& generator() const { return *generator_; }
  int64_t steps_done() const { return step_; }
  bool finished() const { return step_ >= config_.steps; }
  // Processes training together, and this one's rank.
  int ranks() const { return group_ ? group_->size() : 1; }
  int rank() const { return group_ ? group_->rank() : 0; }
  TrainGroup* group() const { return group_.get(); }
  // With the parameters split over the processes (ZeRO-3), their gathers;
  // else nullptr. ParameterShards::Whole(trainer.parameter_shards()) holds
  // every parameter whole, for reading or writing them all.
  ParameterShards* parameter_shards() const { return parameter_shards_.get(); }
  Device device() const { return device_; }
  // Sequences per step: R A B.
  int64_t global_batch() const { return int64_t(ranks()) * config_.grad_accum * config_.batch; }
  int64_t tokens_seen() const { return step_ * global_batch() * config_.seq; }

 private:
  friend void load_train_state(Trainer& trainer, const std::string& dir);

  // The router terms of every micro-batch, summed in micro-batch order and
  // then over processes.
  std::vector<MoeRouterTerms> combine_router_terms(
      const std::vector<std::vector<MoeRouterTerms>>& micro_batches);
  // Auxiliary-loss-free balancing after an applied step: each MoE layer's
  // router bias from `terms` (the step's, in layer order).
  void balance_experts(const std::vector<MoeRouterTerms>& terms);
  // The global gradient norm before clipping, then clips: the gradients,
  // and with the optimizer split this process's blocks of them.
  double clip_gradients(ShardGradients* blocks);
  // `b` on the trainer's device.
  Batch on_device(Batch b) const;
  // The unit a parameter is gathered with when the parameters are split:
  // its decoder layer's index, or rest_unit() for the others.
  size_t unit_of(const std::string& name) const;
  size_t rest_unit() const;

  TrainConfig config_;
  std::shared_ptr<const TextDataset> data_;
  std::shared_ptr<TrainGroup> group_;
  Device device_;
  std::shared_ptr<rng::Generator> generator_;  // shared with the model's dropout and the regions
  std::unique_ptr<LlamaForCausalLM> model_;
  std::unique_ptr<AdamW> optimizer_;
  // With the parameters split over the processes (ZeRO-3).
  std::unique_ptr<ParameterShards> parameter_shards_;
  std::unique_ptr<LayerCheckpointing> checkpointing_;
  CosineSchedule schedule_;
  OnNonFinite on_nonfinite_ = OnNonFinite::stop;
  int64_t step_ = 0;
};

// The --dump-grads file: input_ids and labels (B, T) i64, "loss" () f32,
// "logits" (B, T, V) f32 and every parameter's gradient under its Hugging
// Face name, written atomically. Call it after backward (a Trainer's
// AfterBackward hook), before any update.
void write_gradient_dump(const std::string& path, const LlamaForCausalLM& model, const Batch& batch,
                         const Tensor& logits, const Tensor& loss);

}  // namespace reprise::nn
