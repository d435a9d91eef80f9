#pragma once
// The NCCL communicator: CUDA tensors between processes, one GPU each
// (built when the build has CUDA; NCCL comes with the CUDA toolkit).
//
// It is bootstrapped through another communicator (MPI's): rank 0's
// ncclUniqueId is broadcast to every rank. exchange() is one group of
// ncclSend / ncclRecv on a stream of its own, and its wait polls that
// stream and ncclCommGetAsyncError (the communicator is non-blocking) until
// the timeout, when it aborts the communicator (ncclCommAbort) and raises
// naming the collective and the peers. NCCL does not tell a receiver the
// size a sender used, so ranks passing tensors of different sizes end in
// that timeout or in NCCL's own error, not in a size message. The
// rank-ordered sums run on the CUDA backend (Backend::binary), like every
// other kernel.

#include <memory>

#include "parallel/communicator.h"

namespace reprise::parallel {

class NcclCommunicator final : public Communicator {
 public:
  // This rank's GPU is `device` (cuda:i); every wait for a peer lasts at
  // most `timeout_seconds`. Collective over `bootstrap` (CPU tensors).
  NcclCommunicator(Communicator& bootstrap, Device device, double timeout_seconds);
  ~NcclCommunicator() override;

  std::string kind() const override { return "NCCL"; }
  Device device() const override { return device_; }
  // ncclCommSplit of this one. Collective.
  std::unique_ptr<Communicator> duplicate() override;

  struct State;  // the NCCL and CUDA handles, kept out of this header

 private:
  NcclCommunicator(std::unique_ptr<State> state, Device device, int rank, int size);
  void exchange(const std::string& op, const std::vector<Message>& sends,
                const std::vector<Message>& recvs) override;

  Device device_;
  std::unique_ptr<State> state_;
};

}  // namespace reprise::parallel
