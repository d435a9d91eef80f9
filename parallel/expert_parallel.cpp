#include "parallel/expert_parallel.h"

#include <numeric>

#include "autograd/op_registry.h"
#include "autograd/scope.h"
#include "autograd/tape.h"

namespace reprise::parallel {
namespace {

// Rows exchanged between the ranks: what a recompute must never replay.
const autograd::OpInfo kAllToAllV{.name = "all_to_all_v", .flops = autograd::no_flops};

// rows (M, C) -> all_to_all_v(rows, send, recv), recorded; its backward
// sends the gradients back the other way.
Tensor exchange_rows(const std::shared_ptr<Communicator>& comm, const Tensor& rows,
                     const std::vector<int64_t>& send, const std::vector<int64_t>& recv) {
  auto ran = std::make_shared<bool>(false);
  return autograd::record_one({
      .op = kAllToAllV,
      .inputs = {rows},
      .forward =
          [comm, send, recv, ran](const autograd::Tensors& in, const rng::Reservation*) {
            REPRISE_CHECK(!*ran, "all_to_all_v: a checkpoint replay reached an exchange between ",
                          "processes; its output must be saved (scope *.", nn::kExpertExchangeScope,
                          ".*)");
            *ran = true;
            return autograd::Tensors{comm->all_to_all_v(in[0].contiguous(), send, recv)};
          },
      .backward =
          [comm, send, recv](autograd::Node&, const autograd::Tensors& g) {
            return autograd::Tensors{comm->all_to_all_v(g[0].contiguous(), recv, send)};
          },
  });
}

}  // namespace

ExpertParallel::ExpertParallel(std::shared_ptr<Communicator> comm) : comm_(std::move(comm)) {
  REPRISE_CHECK(comm_ != nullptr, "ExpertParallel: no communicator");
  autograd::register_op(kAllToAllV);
}

nn::ExpertRange ExpertParallel::local_experts(int64_t num_experts) const {
  const int64_t R = comm_->size();
  REPRISE_CHECK(num_experts >= R && num_experts % R == 0, "expert parallelism: ", num_experts,
                " experts per layer do not split evenly over ", R, " processes");
  const int64_t per = num_experts / R;
  return {.first = comm_->rank() * per, .count = per};
}

Tensor ExpertParallel::run(const Tensor& xs, const std::vector<int64_t>& counts,
                           const nn::LocalExperts& run_local) const {
  const int64_t R = comm_->size(), E = int64_t(counts.size());
  const nn::ExpertRange mine = local_experts(E);
  const int64_t per = mine.count;
  // 1. Counts first: row j of `theirs` is rank j / per's count for my
  // expert first + j % per.
  const Tensor mine_counts = Tensor::from_vector(counts, {E});  // (E) i64
  const std::vector<int64_t> per_rank(size_t(R), per);
  const std::vector<int64_t> block_rows =
      comm_->all_to_all_v(mine_counts, per_rank, per_rank).to_vector<int64_t>();  // (R per)
  std::vector<int64_t> send(size_t(R), 0), recv(size_t(R), 0),
      block_expert(static_cast<size_t>(R * per));
  for (int64_t e = 0; e < E; ++e) send[size_t(e / per)] += counts[size_t(e)];
  for (int64_t j = 0; j < R * per; ++j) {
    recv[size_t(j / per)] += block_rows[size_t(j)];
    block_expert[size_t(j)] = mine.first + j % per;
  }
  REPRISE_CHECK(std::accumulate(send.begin(), send.end(), int64_t(0)) == xs.size(0),
                "expert parallelism: the counts add up to ",
                std::accumulate(send.begin(), send.end(), int64_t(0)), " rows, but xs is ",
                xs.describe());
  // 2.-4. Dispatch, the local experts (recorded under the layer's own
  // scope, "experts.w1", ..., as without expert parallelism), combine.
  auto exchange = [&](const char* step, const Tensor& rows, const std::vector<int64_t>& to,
                      const std::vector<int64_t>& from) {
    autograd::Scope outer(nn::kExpertExchangeScope);
    autograd::Scope inner(step);
    return exchange_rows(comm_, rows, to, from);
  };
  const Tensor received = exchange("dispatch", xs, send, recv);          // (sum recv, C)
  const Tensor outputs = run_local(received, block_rows, block_expert);  // (sum recv, C)
  return exchange("combine", outputs, recv, send);                       // (M, C)
}

}  // namespace reprise::parallel
