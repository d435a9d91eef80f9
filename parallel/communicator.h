#pragma once
// Collectives between the R processes (ranks) of a run: all_reduce,
// reduce_scatter, all_gather, broadcast, all_to_all_v and barrier.
//
// They are written once, here, over one primitive that each transport
// provides: exchange(), a set of sends to and receives from peers that
// completes together. So every transport (MPI for CPU tensors, NCCL for GPU
// tensors, one process alone) adds in the same order and gives the same
// bits:
//   sum over ranks = ((x_0 + x_1) + x_2) + ... + x_{R-1}
// element by element (reprise::sum_of), which is also how gradient
// accumulation adds micro-batches one after another: R ranks of one
// micro-batch each give the bits of one rank accumulating R micro-batches.
// all_reduce is a reduce-scatter (rank q adds up chunk q of every rank's
// tensor, in rank order) followed by an all-gather of the sums, so each
// rank sends and receives 2 (R - 1) / R of the tensor, as a ring would.
//
// Failures are Errors, never silent hangs: a transport waits at most its
// timeout for its peers, then raises naming the collective, this rank and
// the ranks that did not answer; a message of another size than expected
// (ranks passing tensors of different sizes) raises naming both ranks and
// sizes. After a failure the communicator refuses further work.
//
// Every rank must call the same collectives in the same order. Calls on one
// communicator must not overlap; a second thread uses its own
// (duplicate()).
//
// R = ranks, n = elements.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace reprise::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // "MPI", "NCCL" or "single process".
  virtual std::string kind() const = 0;
  // The device the tensors it moves live on.
  virtual Device device() const = 0;

  // t (any shape, contiguous) <- the sum over ranks, in rank order.
  void all_reduce(Tensor& t);
  // t: (R m, ...) -> (m, ...): block r of the sum over ranks (rank order).
  Tensor reduce_scatter(const Tensor& t);
  // t: (...) the same shape on every rank -> (R, ...), rank r's at r.
  Tensor all_gather(const Tensor& t);
  // t <- root's t.
  void broadcast(Tensor& t, int root);
  // send: (M, ...), rows [o_q, o_q + send_rows[q]) for rank q -> (sum of
  // recv_rows, ...), recv_rows[p] rows from rank p, in rank order. Rank p's
  // send_rows[r] must equal rank r's recv_rows[p].
  Tensor all_to_all_v(const Tensor& send, const std::vector<int64_t>& send_rows,
                      const std::vector<int64_t>& recv_rows);
  // Returns once every rank has called it.
  void barrier();

  // A communicator over the same ranks whose messages never mix with this
  // one's, for another thread. Collective: every rank calls it.
  virtual std::unique_ptr<Communicator> duplicate() = 0;
  // Every later wait for another rank lasts at most `seconds`.
  void set_timeout(double seconds);
  double timeout() const { return timeout_; }

 protected:
  Communicator(int rank, int size);

  // A byte range sent to or received from `peer` (this rank included).
  struct Message {
    int peer;
    void* data;
    size_t bytes;
  };
  // Starts every send and receive and returns when all have completed.
  // Raises an Error naming `op` (and the ranks involved) on a timeout or a
  // message of the wrong size.
  virtual void exchange(const std::string& op, const std::vector<Message>& sends,
                        const std::vector<Message>& recvs) = 0;

  // "all_reduce (f32[1000] cpu) on rank 1 of 2"
  std::string where(const char* op, const Tensor& t) const;

  // Runs a transport's work for `op`; after an Error from it the
  // communicator refuses every later call, naming that first failure.
  void guarded(const std::string& op, const std::function<void()>& work);
  bool failed() const { return !failure_.empty(); }

 private:
  // Checks t's device and layout for `op`.
  void check(const char* op, const Tensor& t) const;

  int rank_;
  int size_;
  double timeout_ = 300;  // seconds
  std::string failure_;   // the first failure
};

}  // namespace reprise::parallel
