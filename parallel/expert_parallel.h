#pragma once
// Expert parallelism over a Communicator (nn::ExpertDispatch): rank r of R
// holds experts [r E / R, (r + 1) E / R) of every MoE layer, and every rank
// routes its own tokens (its micro-batch, as in data parallelism).
//
// For one layer, with each rank's kept assignments sorted by expert:
//   1. counts: each rank sends every other rank how many of its rows go to
//      each of that rank's experts (all_to_all_v of E / R counts per rank);
//   2. dispatch: the rows themselves (all_to_all_v); rank q receives, from
//      each rank p in order, p's rows for q's experts, expert by expert;
//   3. the local experts run on those blocks, one block per (sender,
//      expert), so a weight's gradient sums its blocks in sender order, as
//      one process accumulating the senders' micro-batches would;
//   4. combine: the outputs go back (all_to_all_v), in the sender's order.
// Dispatch and combine are one recorded op each ("all_to_all_v", scope
// "<layer>.experts.all_to_all.{dispatch,combine}"); the backward of each is
// the exchange the other way. Checkpointed layers always keep their outputs
// (nn/checkpointing.h), so a replay never communicates, and the op refuses
// to run a second time.
//
// M = kept assignments of this rank, C = hidden size, E = experts.

#include <memory>

#include "nn/moe.h"
#include "parallel/communicator.h"

namespace reprise::parallel {

class ExpertParallel final : public nn::ExpertDispatch {
 public:
  explicit ExpertParallel(std::shared_ptr<Communicator> comm);

  nn::ExpertRange local_experts(int64_t num_experts) const override;
  Tensor run(const Tensor& xs, const std::vector<int64_t>& counts,
             const nn::LocalExperts& run_local) const override;

 private:
  std::shared_ptr<Communicator> comm_;
};

}  // namespace reprise::parallel
