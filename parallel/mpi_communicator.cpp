#include "parallel/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <set>
#include <thread>

namespace reprise::parallel {

struct MpiCommunicator::State {
  MPI_Comm comm = MPI_COMM_NULL;
  int tag_ub = 32767;      // MPI guarantees at least this
  uint64_t exchanges = 0;  // the next exchange's number; its tag is this modulo tag_ub
};

namespace {

using Clock = std::chrono::steady_clock;

// MPI counts are ints: larger messages go as several pieces of this many
// bytes, in order (MPI does not reorder messages of one sender, tag and
// communicator).
constexpr size_t kMaxPiece = size_t(1) << 30;

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, size_t(len));
}

// "rank 1" or "ranks 1, 3"
std::string ranks_text(const std::set<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  bool first = true;
  for (int r : ranks) {
    out += (first ? "" : ", ") + std::to_string(r);
    first = false;
  }
  return out;
}

// One posted request: a piece of a message to or from `peer`, or an
// operation on the communicator itself (peer -1).
struct Pending {
  MPI_Request request = MPI_REQUEST_NULL;
  enum class Kind { send, recv, other } kind;
  int peer = -1;
  size_t bytes = 0;  // what a receive expects
  bool done = false;
};

// Polls every request until all have completed, the timeout passes (an
// Error naming the ranks still missing) or a receive gets another size (an
// Error naming both ranks). On an Error the pending requests are cancelled
// (receives) or released (sends).
void wait_all(const std::string& op, std::vector<Pending>& pending, double timeout, int rank) {
  std::vector<MPI_Request> requests(pending.size());
  for (size_t i = 0; i < pending.size(); ++i) requests[i] = pending[i].request;
  std::vector<int> index(pending.size());
  std::vector<MPI_Status> status(pending.size());
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout));
  auto nap = std::chrono::microseconds(20);
  std::string error;
  size_t left = pending.size();
  while (left > 0 && error.empty()) {
    int completed = 0;
    const int rc = MPI_Testsome(int(requests.size()), requests.data(), &completed, index.data(),
                                status.data());
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
      error = "MPI_Testsome failed: " + mpi_error(rc);
      break;
    }
    if (completed == MPI_UNDEFINED) break;
    for (int i = 0; i < completed; ++i) {
      Pending& p = pending[size_t(index[size_t(i)])];
      const MPI_Status& s = status[size_t(i)];
      p.done = true;
      --left;
      if (rc == MPI_ERR_IN_STATUS && s.MPI_ERROR != MPI_SUCCESS) {
        int error_class = 0;
        MPI_Error_class(s.MPI_ERROR, &error_class);
        error =
            error_class == MPI_ERR_TRUNCATE && p.kind == Pending::Kind::recv
                ? detail::concat("rank ", p.peer, " sent more than the ", p.bytes, " bytes rank ",
                                 rank, " expected (the ranks passed tensors of different sizes)")
                : detail::concat("a message ", p.kind == Pending::Kind::send ? "to" : "from",
                                 " rank ", p.peer, " failed: ", mpi_error(s.MPI_ERROR));
        continue;
      }
      if (p.kind == Pending::Kind::recv) {
        int count = 0;
        MPI_Get_count(&s, MPI_BYTE, &count);
        if (size_t(count) != p.bytes) {
          error = detail::concat("rank ", p.peer, " sent ", count, " bytes where rank ", rank,
                                 " expected ", p.bytes,
                                 " (the ranks passed tensors of different sizes)");
        }
      }
    }
    if (left == 0 || !error.empty()) break;
    if (completed > 0) {
      nap = std::chrono::microseconds(20);
      continue;
    }
    if (Clock::now() > deadline) {
      std::set<int> silent, deaf;
      for (const Pending& p : pending) {
        if (p.done) continue;
        if (p.kind == Pending::Kind::recv) silent.insert(p.peer);
        if (p.kind == Pending::Kind::send) deaf.insert(p.peer);
      }
      for (int r : silent) deaf.erase(r);
      error = detail::concat("timed out after ", timeout, " s: ");
      if (!silent.empty()) error += "no data from " + ranks_text(silent);
      if (!silent.empty() && !deaf.empty()) error += "; ";
      if (!deaf.empty()) error += ranks_text(deaf) + " did not take the data sent to them";
      if (silent.empty() && deaf.empty()) error += "MPI did not complete the operation";
      error += " (a rank exited, failed, is stuck, or called another collective)";
      break;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(1000));
  }
  if (error.empty()) return;
  for (size_t i = 0; i < pending.size(); ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    if (pending[i].kind == Pending::Kind::recv) MPI_Cancel(&requests[i]);
    MPI_Request_free(&requests[i]);
  }
  REPRISE_FAIL(op, ": ", error);
}

std::unique_ptr<MpiCommunicator::State> duplicate_of(MPI_Comm comm, double timeout,
                                                     const std::string& op, int rank) {
  auto state = std::make_unique<MpiCommunicator::State>();
  std::vector<Pending> pending(1, Pending{.kind = Pending::Kind::other});
  const int rc = MPI_Comm_idup(comm, &state->comm, &pending[0].request);
  REPRISE_CHECK(rc == MPI_SUCCESS, op, ": MPI_Comm_idup: ", mpi_error(rc));
  wait_all(op, pending, timeout, rank);
  MPI_Comm_set_errhandler(state->comm, MPI_ERRORS_RETURN);
  int* tag_ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(state->comm, MPI_TAG_UB, &tag_ub, &found);
  if (found && tag_ub != nullptr) state->tag_ub = *tag_ub;
  return state;
}

}  // namespace

MpiCommunicator::MpiCommunicator(std::unique_ptr<State> state, int rank, int size)
    : Communicator(rank, size), state_(std::move(state)) {}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world(double timeout_seconds) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  REPRISE_CHECK(initialized, "MpiCommunicator::world: MPI is not initialised (parallel::World ",
                "initialises it)");
  REPRISE_CHECK(timeout_seconds > 0, "MpiCommunicator::world: the timeout must be positive, got ",
                timeout_seconds);
  int rank = 0, size = 0;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::unique_ptr<State> state =
      duplicate_of(MPI_COMM_WORLD, timeout_seconds,
                   detail::concat("MPI world communicator on rank ", rank, " of ", size), rank);
  auto comm = std::unique_ptr<MpiCommunicator>(new MpiCommunicator(std::move(state), rank, size));
  comm->set_timeout(timeout_seconds);
  return comm;
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // A failed communicator may still have messages in flight: leave it.
  if (!finalized && !failed() && state_->comm != MPI_COMM_NULL) {
    MPI_Comm_free(&state_->comm);
  }
}

std::unique_ptr<Communicator> MpiCommunicator::duplicate() {
  const std::string op = detail::concat("duplicate on rank ", rank(), " of ", size(), " (MPI)");
  std::unique_ptr<State> state;
  guarded(op, [&] { state = duplicate_of(state_->comm, timeout(), op, rank()); });
  auto twin = std::unique_ptr<Communicator>(new MpiCommunicator(std::move(state), rank(), size()));
  twin->set_timeout(timeout());
  return twin;
}

void MpiCommunicator::exchange(const std::string& op, const std::vector<Message>& sends,
                               const std::vector<Message>& recvs) {
  State& s = *state_;
  guarded(op, [&] {
    const int tag = int(s.exchanges++ % uint64_t(s.tag_ub));
    // Messages to itself are copies, the k-th send to the k-th receive.
    std::vector<const Message*> to_self, from_self;
    std::vector<Pending> pending;
    auto post = [&](const Message& m, Pending::Kind kind) {
      REPRISE_CHECK(m.peer >= 0 && m.peer < size(), op, ": no rank ", m.peer);
      size_t done = 0;
      do {
        const size_t piece = std::min(kMaxPiece, m.bytes - done);
        Pending p{.kind = kind, .peer = m.peer, .bytes = piece};
        std::byte* data = static_cast<std::byte*>(m.data) + done;
        const int rc = kind == Pending::Kind::recv
                           ? MPI_Irecv(data, int(piece), MPI_BYTE, m.peer, tag, s.comm, &p.request)
                           : MPI_Isend(data, int(piece), MPI_BYTE, m.peer, tag, s.comm, &p.request);
        REPRISE_CHECK(rc == MPI_SUCCESS, op, ": posting a message ",
                      kind == Pending::Kind::recv ? "from" : "to", " rank ", m.peer, ": ",
                      mpi_error(rc));
        pending.push_back(p);
        done += piece;
      } while (done < m.bytes);
    };
    for (const Message& m : recvs) {
      if (m.peer == rank()) {
        from_self.push_back(&m);
      } else {
        post(m, Pending::Kind::recv);
      }
    }
    for (const Message& m : sends) {
      if (m.peer == rank()) {
        to_self.push_back(&m);
      } else {
        post(m, Pending::Kind::send);
      }
    }
    REPRISE_CHECK(to_self.size() == from_self.size(), op, ": ", to_self.size(),
                  " messages to itself but ", from_self.size(), " from itself");
    for (size_t i = 0; i < to_self.size(); ++i) {
      REPRISE_CHECK(to_self[i]->bytes == from_self[i]->bytes, op, ": rank ", rank(), " sent ",
                    to_self[i]->bytes, " bytes to itself where it expected ", from_self[i]->bytes);
      if (to_self[i]->bytes > 0)
        std::memcpy(from_self[i]->data, to_self[i]->data, to_self[i]->bytes);
    }
    wait_all(op, pending, timeout(), rank());
  });
}

}  // namespace reprise::parallel
