#pragma once
// The processes of a training run over a Communicator, as nn::Trainer uses
// them (nn::TrainGroup): data parallelism with bucketed gradient reduction
// that overlaps backward (gradient_buckets.h), optionally expert
// parallelism for MoE models (expert_parallel.h), the gathers a step and a
// checkpoint need, and a debug check that replicas stay identical.
//
// The training thread uses the communicator it is given; the gradient
// reducer's thread a duplicate of it.

#include <future>
#include <memory>

#include "nn/trainer.h"
#include "parallel/communicator.h"
#include "parallel/expert_parallel.h"
#include "parallel/gradient_buckets.h"

namespace reprise::parallel {

using nn::parse_shard_mode;
using nn::shard_mode_name;
using nn::ShardMode;

struct ProcessGroupOptions {
  bool expert_parallel = false;  // split MoE layers' experts over the ranks
  ShardMode shard = ShardMode::none;
  int64_t bucket_bytes = int64_t(1) << 20;  // gradient bucket size
};

class ProcessGroup final : public nn::TrainGroup {
 public:
  ProcessGroup(std::shared_ptr<Communicator> comm, ProcessGroupOptions options);

  int rank() const override { return comm_->rank(); }
  int size() const override { return comm_->size(); }
  std::shared_ptr<const nn::ExpertDispatch> expert_dispatch() const override { return experts_; }
  void attach(const std::vector<nn::NamedParameter>& replicated,
              const std::vector<size_t>& units) override;
  nn::ShardMode shard_mode() const override;
  void begin_backward() override;
  void end_backward() override;
  std::vector<double> all_gather(const std::vector<double>& values) override;
  const nn::ShardLayout* shard_layout() const override;
  nn::ShardGradients take_gradients() override;
  Tensor all_gather(const Tensor& block) override { return comm_->all_gather(block); }
  std::future<std::vector<Tensor>> all_gather_async(std::vector<Tensor> blocks) override;
  std::vector<std::pair<std::string, Tensor>> gather_named(
      const std::vector<std::pair<std::string, Tensor>>& local, bool everyone) override;

  // Raises an Error naming the replicated parameters whose bits differ
  // between ranks (with the first rank that differs from rank 0): replicas
  // must stay identical, and a bug in reduction or in the random numbers
  // shows here first. Collective.
  void check_replicas() const;

  Communicator& communicator() const { return *comm_; }
  // The reducer (after attach): its buckets and their last timing.
  const GradientBuckets& buckets() const;

 private:
  std::shared_ptr<Communicator> comm_;
  ProcessGroupOptions options_;
  std::shared_ptr<ExpertParallel> experts_;
  std::vector<nn::NamedParameter> replicated_;
  std::unique_ptr<GradientBuckets> buckets_;
  // all_gather_async's (with the parameters split).
  std::shared_ptr<Communicator> gather_comm_;
};

}  // namespace reprise::parallel
