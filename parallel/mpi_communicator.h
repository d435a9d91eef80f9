#pragma once
// The MPI communicator: CPU tensors between the processes mpirun started.
//
// Every collective is non-blocking point-to-point messages (MPI_Isend,
// MPI_Irecv, one tag per exchange) polled with MPI_Testsome until they
// complete or the timeout passes, under MPI_ERRORS_RETURN, so a rank that
// exited, failed or went on to another collective, or a message of another
// size, is an Error naming the collective, this rank and the other ranks,
// never a silent hang. A waiting rank polls with growing sleeps (20 us to
// 1 ms), leaving the cores to the ranks that compute.
//
// MPI must be initialised with MPI_THREAD_MULTIPLE (parallel/world.h does
// it), since the gradient reducer's thread and the training thread each
// drive a communicator of their own.

#include <memory>

#include "parallel/communicator.h"

namespace reprise::parallel {

class MpiCommunicator final : public Communicator {
 public:
  // MPI_COMM_WORLD duplicated; every wait for a peer lasts at most
  // `timeout_seconds`. Collective.
  static std::unique_ptr<MpiCommunicator> world(double timeout_seconds);
  ~MpiCommunicator() override;

  std::string kind() const override { return "MPI"; }
  Device device() const override { return Device::cpu(); }
  std::unique_ptr<Communicator> duplicate() override;

  struct State;  // the MPI handles, kept out of this header

 private:
  MpiCommunicator(std::unique_ptr<State> state, int rank, int size);
  void exchange(const std::string& op, const std::vector<Message>& sends,
                const std::vector<Message>& recvs) override;

  std::unique_ptr<State> state_;
};

}  // namespace reprise::parallel
