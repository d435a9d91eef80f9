#include "parallel/single_process.h"

#include <cstring>

namespace reprise::parallel {

SingleProcessCommunicator::SingleProcessCommunicator() : Communicator(0, 1) {}

std::unique_ptr<Communicator> SingleProcessCommunicator::duplicate() {
  return std::make_unique<SingleProcessCommunicator>();
}

void SingleProcessCommunicator::exchange(const std::string& op, const std::vector<Message>& sends,
                                         const std::vector<Message>& recvs) {
  // Only messages to itself: each send is the receive of the same index.
  REPRISE_CHECK(sends.size() == recvs.size(), op, ": ", sends.size(), " sends but ", recvs.size(),
                " receives");
  for (size_t i = 0; i < sends.size(); ++i) {
    REPRISE_CHECK(sends[i].peer == 0 && recvs[i].peer == 0, op, ": no rank ",
                  sends[i].peer == 0 ? recvs[i].peer : sends[i].peer, " in a single process");
    REPRISE_CHECK(sends[i].bytes == recvs[i].bytes, op, ": rank 0 sent ", sends[i].bytes,
                  " bytes to itself where it expected ", recvs[i].bytes);
    if (sends[i].bytes > 0) std::memcpy(recvs[i].data, sends[i].data, sends[i].bytes);
  }
}

}  // namespace reprise::parallel
