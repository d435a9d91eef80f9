#include "parallel/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <set>
#include <thread>

namespace reprise::parallel {

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

namespace {

void check_cuda(cudaError_t status, const std::string& op, const char* what) {
  REPRISE_CHECK(status == cudaSuccess, op, ": ", what, ": ", cudaGetErrorString(status));
}

// Waits until NCCL has finished what was enqueued (the stream is idle when
// `stream_work`) or fails; aborts the communicator on an error or when the
// timeout passes.
void wait_nccl(NcclCommunicator::State& s, const std::string& op, double timeout, bool stream_work,
               const std::string& peers) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout));
  auto nap = std::chrono::microseconds(20);
  for (;;) {
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(s.comm, &async);
    std::string error;
    if (async != ncclSuccess && async != ncclInProgress) {
      error = std::string("NCCL error: ") + ncclGetErrorString(async);
    } else if (async == ncclSuccess) {
      if (!stream_work) return;
      const cudaError_t q = cudaStreamQuery(s.stream);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) error = std::string("CUDA error: ") + cudaGetErrorString(q);
    }
    if (error.empty() && std::chrono::steady_clock::now() > deadline) {
      error = detail::concat("timed out after ", timeout, " s waiting for ", peers,
                             " (a rank exited, failed, is stuck, called another collective, or ",
                             "passed a tensor of another size)");
    }
    if (!error.empty()) {
      ncclCommAbort(s.comm);
      s.comm = nullptr;
      REPRISE_FAIL(op, ": ", error);
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(1000));
  }
}

void check_nccl(ncclResult_t r, const std::string& op, const char* what) {
  REPRISE_CHECK(r == ncclSuccess || r == ncclInProgress, op, ": ", what, ": ",
                ncclGetErrorString(r));
}

ncclConfig_t nonblocking() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

}  // namespace

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, Device device, double timeout_seconds)
    : Communicator(bootstrap.rank(), bootstrap.size()),
      device_(device),
      state_(std::make_unique<State>()) {
  const std::string op = detail::concat("NCCL communicator on rank ", rank(), " of ", size(), " (",
                                        to_string(device), ")");
  REPRISE_CHECK(device.is_cuda(), op, ": needs a CUDA device");
  set_timeout(timeout_seconds);
  // Rank 0's unique id, through the bootstrap communicator.
  ncclUniqueId id{};
  if (rank() == 0) check_nccl(ncclGetUniqueId(&id), op, "ncclGetUniqueId");
  Tensor words = Tensor::zeros({int64_t((sizeof id + 7) / 8)}, DType::i64);
  std::memcpy(words.raw_data(), &id, sizeof id);
  bootstrap.broadcast(words, 0);
  std::memcpy(&id, words.raw_data(), sizeof id);
  guarded(op, [&] {
    check_cuda(cudaSetDevice(device.index()), op, "cudaSetDevice");
    // A blocking stream: it waits for the backend's work on the default stream.
    check_cuda(cudaStreamCreate(&state_->stream), op, "cudaStreamCreate");
    ncclConfig_t config = nonblocking();
    check_nccl(ncclCommInitRankConfig(&state_->comm, size(), id, rank(), &config), op,
               "ncclCommInitRankConfig");
    wait_nccl(*state_, op, timeout(), false, "every rank to join");
  });
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<State> state, Device device, int rank, int size)
    : Communicator(rank, size), device_(device), state_(std::move(state)) {}

NcclCommunicator::~NcclCommunicator() {
  if (state_->comm != nullptr) {
    if (!failed()) {
      ncclCommDestroy(state_->comm);
    } else {
      ncclCommAbort(state_->comm);
    }
  }
  if (state_->stream != nullptr) cudaStreamDestroy(state_->stream);
}

std::unique_ptr<Communicator> NcclCommunicator::duplicate() {
  const std::string op = detail::concat("duplicate on rank ", rank(), " of ", size(), " (NCCL)");
  auto state = std::make_unique<State>();
  guarded(op, [&] {
    check_cuda(cudaSetDevice(device_.index()), op, "cudaSetDevice");
    check_cuda(cudaStreamCreate(&state->stream), op, "cudaStreamCreate");
    ncclConfig_t config = nonblocking();
    check_nccl(ncclCommSplit(state_->comm, 0, rank(), &state->comm, &config), op, "ncclCommSplit");
    wait_nccl(*state, op, timeout(), false, "every rank to split");
  });
  auto twin = std::unique_ptr<Communicator>(
      new NcclCommunicator(std::move(state), device_, rank(), size()));
  twin->set_timeout(timeout());
  return twin;
}

void NcclCommunicator::exchange(const std::string& op, const std::vector<Message>& sends,
                                const std::vector<Message>& recvs) {
  State& s = *state_;
  guarded(op, [&] {
    check_cuda(cudaSetDevice(device_.index()), op, "cudaSetDevice");
    // Messages to itself are device copies, the k-th send to the k-th receive.
    std::vector<const Message*> to_self, from_self;
    for (const Message& m : sends) {
      if (m.peer == rank()) to_self.push_back(&m);
    }
    for (const Message& m : recvs) {
      if (m.peer == rank()) from_self.push_back(&m);
    }
    REPRISE_CHECK(to_self.size() == from_self.size(), op, ": ", to_self.size(),
                  " messages to itself but ", from_self.size(), " from itself");
    for (size_t i = 0; i < to_self.size(); ++i) {
      REPRISE_CHECK(to_self[i]->bytes == from_self[i]->bytes, op, ": rank ", rank(), " sent ",
                    to_self[i]->bytes, " bytes to itself where it expected ", from_self[i]->bytes);
      if (to_self[i]->bytes == 0) continue;
      check_cuda(cudaMemcpyAsync(from_self[i]->data, to_self[i]->data, to_self[i]->bytes,
                                 cudaMemcpyDeviceToDevice, s.stream),
                 op, "cudaMemcpyAsync");
    }
    std::set<int> peers;
    check_nccl(ncclGroupStart(), op, "ncclGroupStart");
    for (const Message& m : recvs) {
      if (m.peer == rank()) continue;
      check_nccl(ncclRecv(m.data, m.bytes, ncclUint8, m.peer, s.comm, s.stream), op, "ncclRecv");
      peers.insert(m.peer);
    }
    for (const Message& m : sends) {
      if (m.peer == rank()) continue;
      check_nccl(ncclSend(m.data, m.bytes, ncclUint8, m.peer, s.comm, s.stream), op, "ncclSend");
      peers.insert(m.peer);
    }
    check_nccl(ncclGroupEnd(), op, "ncclGroupEnd");
    std::string waiting_for = "ranks";
    for (const int p : peers) {
      waiting_for += ' ';
      waiting_for += std::to_string(p);
    }
    wait_nccl(s, op, timeout(), true, peers.empty() ? "this rank's copies" : waiting_for);
  });
}

}  // namespace reprise::parallel
