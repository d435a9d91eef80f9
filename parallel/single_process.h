#pragma once
// The communicator of a run that is one process: rank 0 of 1, CPU tensors.
// Every collective is the identity (all_to_all_v a copy), through the same
// code as with several ranks, so a one-process run takes the data-parallel
// and expert-parallel paths it takes on many. (One GPU process uses NCCL
// with one rank.)

#include <memory>

#include "parallel/communicator.h"

namespace reprise::parallel {

class SingleProcessCommunicator final : public Communicator {
 public:
  SingleProcessCommunicator();

  std::string kind() const override { return "single process"; }
  Device device() const override { return Device::cpu(); }
  std::unique_ptr<Communicator> duplicate() override;

 private:
  void exchange(const std::string& op, const std::vector<Message>& sends,
                const std::vector<Message>& recvs) override;
};

}  // namespace reprise::parallel
