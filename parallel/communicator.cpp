#include "parallel/communicator.h"

#include <numeric>

#include "engine/accumulate.h"
#include "engine/backend.h"

namespace reprise::parallel {
namespace {

// Element offsets of R nearly equal chunks of n: chunk q is [b[q], b[q + 1]).
std::vector<int64_t> chunk_bounds(int64_t n, int ranks) {
  std::vector<int64_t> b(size_t(ranks) + 1);
  for (int q = 0; q <= ranks; ++q) b[size_t(q)] = n * q / ranks;
  return b;
}

std::byte* bytes_of(const Tensor& t) { return static_cast<std::byte*>(t.raw_data()); }

}  // namespace

Communicator::Communicator(int rank, int size) : rank_(rank), size_(size) {
  REPRISE_CHECK(size >= 1 && rank >= 0 && rank < size, "Communicator: rank ", rank,
                " is not in [0, ", size, ")");
}

void Communicator::set_timeout(double seconds) {
  REPRISE_CHECK(seconds > 0, kind(), " communicator: the timeout must be positive, got ", seconds);
  timeout_ = seconds;
}

void Communicator::guarded(const std::string& op, const std::function<void()>& work) {
  REPRISE_CHECK(failure_.empty(), op, ": the communicator failed earlier: ", failure_);
  try {
    work();
  } catch (const Error& e) {
    failure_ = e.what();
    throw;
  }
}

std::string Communicator::where(const char* op, const Tensor& t) const {
  return detail::concat(op, " (", t.defined() ? t.describe() : std::string("no tensor"),
                        ") on rank ", rank_, " of ", size_, " (", kind(), ")");
}

void Communicator::check(const char* op, const Tensor& t) const {
  REPRISE_CHECK(t.defined(), where(op, t), ": undefined tensor");
  REPRISE_CHECK(t.device() == device(), where(op, t), ": the tensor is on ", to_string(t.device()),
                ", this communicator moves tensors on ", to_string(device()));
  REPRISE_CHECK(t.is_contiguous(), where(op, t), ": the tensor must be contiguous");
}

void Communicator::all_reduce(Tensor& t) {
  check("all_reduce", t);
  if (size_ == 1) return;
  const std::string op = where("all_reduce", t);
  const int64_t n = t.numel();
  const size_t es = t.element_size();
  const std::vector<int64_t> b = chunk_bounds(n, size_);
  const Tensor flat = t.view({n});
  const int64_t mine = b[size_t(rank_) + 1] - b[size_t(rank_)];
  // Reduce-scatter: chunk `rank` of every rank, row p from rank p.
  Tensor rows = Tensor::empty({size_, mine}, t.dtype(), t.device());  // (R, mine)
  std::vector<Message> sends, recvs;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    sends.push_back(
        {p, bytes_of(t) + size_t(b[size_t(p)]) * es, size_t(b[size_t(p) + 1] - b[size_t(p)]) * es});
    recvs.push_back({p, bytes_of(rows) + size_t(p * mine) * es, size_t(mine) * es});
  }
  exchange(op, sends, recvs);
  const Tensor own = flat.slice(0, b[size_t(rank_)], b[size_t(rank_) + 1]);
  auto row = [&](int p) { return p == rank_ ? own : rows.select(0, p); };
  // The sum in rank order; the last addition writes the chunk in place.
  Tensor acc = row(0);
  for (int p = 1; p < size_; ++p) {
    if (p + 1 < size_) {
      acc = sum_of(acc, row(p));
    } else {
      Tensor out = own;
      backend(t.device()).binary(BinaryOp::add, out, acc, row(p));
    }
  }
  // All-gather of the summed chunks.
  sends.clear();
  recvs.clear();
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    sends.push_back({p, bytes_of(t) + size_t(b[size_t(rank_)]) * es, size_t(mine) * es});
    recvs.push_back(
        {p, bytes_of(t) + size_t(b[size_t(p)]) * es, size_t(b[size_t(p) + 1] - b[size_t(p)]) * es});
  }
  exchange(op, sends, recvs);
  t.storage()->bump_version();
}

Tensor Communicator::reduce_scatter(const Tensor& t) {
  check("reduce_scatter", t);
  const std::string op = where("reduce_scatter", t);
  REPRISE_CHECK(t.dim() >= 1 && t.size(0) % size_ == 0, op, ": dimension 0 (",
                t.dim() >= 1 ? t.size(0) : 0, ") must be a multiple of the ", size_, " ranks");
  const int64_t m = t.size(0) / size_;
  const Tensor own = t.slice(0, rank_ * m, (rank_ + 1) * m);  // (m, ...)
  if (size_ == 1) return own.clone();
  const size_t block = own.nbytes();
  Shape rows_shape = own.shape();
  rows_shape.insert(rows_shape.begin(), size_);
  Tensor rows = Tensor::empty(rows_shape, t.dtype(), t.device());  // (R, m, ...)
  std::vector<Message> sends, recvs;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    sends.push_back({p, bytes_of(t) + size_t(p) * block, block});
    recvs.push_back({p, bytes_of(rows) + size_t(p) * block, block});
  }
  exchange(op, sends, recvs);
  auto row = [&](int p) { return p == rank_ ? own : rows.select(0, p); };
  Tensor acc = row(0);
  for (int p = 1; p < size_; ++p) acc = sum_of(acc, row(p));
  return acc;
}

Tensor Communicator::all_gather(const Tensor& t) {
  check("all_gather", t);
  Shape shape = t.shape();
  shape.insert(shape.begin(), size_);
  Tensor out = Tensor::empty(shape, t.dtype(), t.device());  // (R, ...)
  const size_t block = t.nbytes();
  std::vector<Message> sends, recvs;
  for (int p = 0; p < size_; ++p) {
    sends.push_back({p, bytes_of(t), block});
    recvs.push_back({p, bytes_of(out) + size_t(p) * block, block});
  }
  exchange(where("all_gather", t), sends, recvs);
  return out;
}

void Communicator::broadcast(Tensor& t, int root) {
  check("broadcast", t);
  const std::string op = where("broadcast", t);
  REPRISE_CHECK(root >= 0 && root < size_, op, ": root ", root, " is not a rank");
  if (size_ == 1) return;
  std::vector<Message> sends, recvs;
  if (rank_ == root) {
    for (int p = 0; p < size_; ++p) {
      if (p != root) sends.push_back({p, bytes_of(t), t.nbytes()});
    }
  } else {
    recvs.push_back({root, bytes_of(t), t.nbytes()});
  }
  exchange(op, sends, recvs);
  t.storage()->bump_version();
}

Tensor Communicator::all_to_all_v(const Tensor& send, const std::vector<int64_t>& send_rows,
                                  const std::vector<int64_t>& recv_rows) {
  check("all_to_all_v", send);
  const std::string op = where("all_to_all_v", send);
  REPRISE_CHECK(send.dim() >= 1, op, ": expected rows (M, ...)");
  REPRISE_CHECK(send_rows.size() == size_t(size_) && recv_rows.size() == size_t(size_), op,
                ": expected ", size_, " send and receive counts, got ", send_rows.size(), " and ",
                recv_rows.size());
  for (int p = 0; p < size_; ++p) {
    REPRISE_CHECK(send_rows[size_t(p)] >= 0 && recv_rows[size_t(p)] >= 0, op,
                  ": negative row count for rank ", p);
  }
  const int64_t sent = std::accumulate(send_rows.begin(), send_rows.end(), int64_t(0));
  REPRISE_CHECK(sent == send.size(0), op, ": the send counts add up to ", sent, " rows, not ",
                send.size(0));
  const int64_t received = std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t(0));
  Shape shape = send.shape();
  shape[0] = received;
  Tensor out = Tensor::empty(shape, send.dtype(), send.device());  // (received, ...)
  const size_t row = send.element_size() * size_t(numel(Shape(shape.begin() + 1, shape.end())));
  std::vector<Message> sends, recvs;
  int64_t s = 0, r = 0;
  for (int p = 0; p < size_; ++p) {
    sends.push_back({p, bytes_of(send) + size_t(s) * row, size_t(send_rows[size_t(p)]) * row});
    recvs.push_back({p, bytes_of(out) + size_t(r) * row, size_t(recv_rows[size_t(p)]) * row});
    s += send_rows[size_t(p)];
    r += recv_rows[size_t(p)];
  }
  exchange(op, sends, recvs);
  return out;
}

void Communicator::barrier() {
  const Tensor token = Tensor::zeros({1}, DType::i32, device());
  all_gather(token);
}

}  // namespace reprise::parallel
