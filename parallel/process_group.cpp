#include "parallel/process_group.h"

#include <cstring>
#include <string_view>

#include "autograd/verifier.h"

namespace reprise::parallel {
namespace {

// Named tensors as bytes: per entry the name's length and bytes, the dtype,
// the rank and sizes, the data; padded to whole i64 words for the
// communicator.
class Packer {
 public:
  template <class T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put_bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  Tensor words() const {
    Tensor t = Tensor::zeros({int64_t((bytes_.size() + 7) / 8)}, DType::i64);
    if (!bytes_.empty()) std::memcpy(t.raw_data(), bytes_.data(), bytes_.size());
    return t;
  }

 private:
  std::vector<uint8_t> bytes_;
};

Tensor pack(const std::vector<std::pair<std::string, Tensor>>& entries) {
  Packer out;
  out.put(uint64_t(entries.size()));
  for (const auto& [name, value] : entries) {
    const Tensor t = value.to(Device::cpu()).contiguous();
    out.put(uint64_t(name.size()));
    out.put_bytes(name.data(), name.size());
    out.put(uint8_t(t.dtype()));
    out.put(uint64_t(t.dim()));
    for (int64_t d = 0; d < t.dim(); ++d) out.put(t.size(d));
    out.put_bytes(t.raw_data(), t.nbytes());
  }
  return out.words();
}

class Unpacker {
 public:
  Unpacker(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  const uint8_t* take(size_t n) {
    REPRISE_CHECK(n <= size_ - pos_, "gather_named: a rank's entries are truncated");
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
};

std::vector<std::pair<std::string, Tensor>> unpack(const int64_t* words, int64_t count) {
  Unpacker in(reinterpret_cast<const uint8_t*>(words), size_t(count) * 8);
  std::vector<std::pair<std::string, Tensor>> out;
  const uint64_t n = in.get<uint64_t>();
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t len = in.get<uint64_t>();
    std::string name(reinterpret_cast<const char*>(in.take(len)), len);
    const auto dtype = DType(in.get<uint8_t>());
    Shape shape(in.get<uint64_t>());
    for (int64_t& d : shape) d = in.get<int64_t>();
    Tensor t = Tensor::empty(shape, dtype);
    std::memcpy(t.raw_data(), in.take(t.nbytes()), t.nbytes());
    out.emplace_back(std::move(name), std::move(t));
  }
  return out;
}

// Consecutive entries that are all split (one rank's experts) or all
// replicated.
struct Run {
  bool split;
  std::vector<std::pair<std::string, Tensor>> entries;
};

std::vector<Run> runs_of(std::vector<std::pair<std::string, Tensor>> entries) {
  std::vector<Run> runs;
  for (auto& entry : entries) {
    const bool split = nn::is_expert_parameter(entry.first);
    if (runs.empty() || runs.back().split != split) runs.push_back({split, {}});
    runs.back().entries.push_back(std::move(entry));
  }
  return runs;
}

}  // namespace

ProcessGroup::ProcessGroup(std::shared_ptr<Communicator> comm, ProcessGroupOptions options)
    : comm_(std::move(comm)), options_(options) {
  REPRISE_CHECK(comm_ != nullptr, "ProcessGroup: no communicator");
  if (options_.expert_parallel) experts_ = std::make_shared<ExpertParallel>(comm_);
}

void ProcessGroup::attach(const std::vector<nn::NamedParameter>& replicated,
                          const std::vector<size_t>& units) {
  REPRISE_CHECK(!buckets_, "ProcessGroup::attach: called twice");
  replicated_ = replicated;
  // Nothing split: the tight buffers of plain data parallelism. Split:
  // blocks aligned to the norm's chunks, and with the parameters split,
  // buckets that never cross a unit (each is gathered with its unit).
  const ShardMode mode = shard_mode();
  const bool split = mode != ShardMode::none;
  buckets_ = std::make_unique<GradientBuckets>(
      comm_->duplicate(),
      nn::ShardLayout::build(replicated_, options_.bucket_bytes, split ? size() : 1,
                             split ? nn::kGradNormChunk : 1,
                             mode == ShardMode::parameters ? units : std::vector<size_t>{}),
      mode == ShardMode::gradients || mode == ShardMode::parameters ? Reduction::reduce_scatter
                                                                    : Reduction::all_reduce);
  if (mode == ShardMode::parameters) gather_comm_ = comm_->duplicate();
}

std::future<std::vector<Tensor>> ProcessGroup::all_gather_async(std::vector<Tensor> blocks) {
  REPRISE_CHECK(gather_comm_, "ProcessGroup::all_gather_async: the parameters are not split");
  return std::async(std::launch::async, [comm = gather_comm_, blocks = std::move(blocks)] {
    std::vector<Tensor> out;
    for (const Tensor& block : blocks) out.push_back(comm->all_gather(block));
    return out;
  });
}

nn::ShardMode ProcessGroup::shard_mode() const {
  return size() == 1 ? ShardMode::none : options_.shard;
}

const nn::ShardLayout* ProcessGroup::shard_layout() const {
  if (shard_mode() == ShardMode::none) return nullptr;
  REPRISE_CHECK(buckets_, "ProcessGroup: no model attached");
  return &buckets_->layout();
}

nn::ShardGradients ProcessGroup::take_gradients() {
  REPRISE_CHECK(buckets_, "ProcessGroup: no model attached");
  return buckets_->take_gradients();
}

const GradientBuckets& ProcessGroup::buckets() const {
  REPRISE_CHECK(buckets_, "ProcessGroup: no model attached");
  return *buckets_;
}

void ProcessGroup::begin_backward() {
  REPRISE_CHECK(buckets_, "ProcessGroup: no model attached");
  buckets_->begin();
}

void ProcessGroup::end_backward() {
  REPRISE_CHECK(buckets_, "ProcessGroup: no model attached");
  buckets_->finish();
}

std::vector<double> ProcessGroup::all_gather(const std::vector<double>& values) {
  const Tensor mine = Tensor::from_vector(values, {int64_t(values.size())});
  return comm_->all_gather(mine).to_vector<double>();
}

std::vector<std::pair<std::string, Tensor>> ProcessGroup::gather_named(
    const std::vector<std::pair<std::string, Tensor>>& local, bool everyone) {
  const bool receive = everyone || rank() == 0;
  // Without split experts every rank holds the same list.
  if (!experts_) return receive ? local : std::vector<std::pair<std::string, Tensor>>{};
  const int R = size();
  // The sizes first, then the packed lists.
  const Tensor words = pack(local);
  const std::vector<int64_t> sizes =
      comm_->all_gather(Tensor::from_vector<int64_t>({words.numel()}, {1})).to_vector<int64_t>();
  const int64_t n = words.numel();
  std::vector<int64_t> send(size_t(R), 0), recv(size_t(R), 0);
  for (int q = 0; q < R; ++q) {
    if (everyone || q == 0) send[size_t(q)] = n;
    if (receive) recv[size_t(q)] = sizes[size_t(q)];
  }
  // One copy of the list for each rank it goes to.
  const int64_t copies = everyone ? R : 1;
  Tensor outgoing = Tensor::empty({copies * n}, DType::i64);  // (copies n)
  for (int64_t c = 0; c < copies; ++c) outgoing.slice(0, c * n, (c + 1) * n).copy_(words);
  const Tensor all = comm_->all_to_all_v(outgoing, send, recv);
  if (!receive) return {};
  std::vector<std::vector<Run>> per_rank;
  int64_t at = 0;
  for (int q = 0; q < R; ++q) {
    per_rank.push_back(runs_of(unpack(all.data<int64_t>() + at, sizes[size_t(q)])));
    at += sizes[size_t(q)];
  }
  // Rank 0's replicated runs; the split runs of every rank, in rank order.
  std::vector<std::pair<std::string, Tensor>> merged;
  for (size_t k = 0; k < per_rank[0].size(); ++k) {
    for (int q = 0; q < R; ++q) {
      REPRISE_CHECK(per_rank[size_t(q)].size() == per_rank[0].size() &&
                        per_rank[size_t(q)][k].split == per_rank[0][k].split,
                    "gather_named: the entries of rank ", q, " do not line up with rank 0's");
      if (q > 0 && !per_rank[0][k].split) continue;
      for (auto& entry : per_rank[size_t(q)][k].entries) merged.push_back(std::move(entry));
    }
  }
  return merged;
}

void ProcessGroup::check_replicas() const {
  std::vector<int64_t> hashes;
  for (const nn::NamedParameter& p : replicated_) {
    hashes.push_back(int64_t(autograd::hash_values(p.value.detach())));
  }
  const int64_t n = int64_t(hashes.size());
  const std::vector<int64_t> all =
      comm_->all_gather(Tensor::from_vector(hashes, {n})).to_vector<int64_t>();  // (R, n)
  std::string differing;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int q = 1; q < size(); ++q) {
      if (all[size_t(q * n + i)] == all[size_t(i)]) continue;
      if (count++ < 3) {
        differing += (differing.empty() ? "'" : ", '") + replicated_[size_t(i)].name + "' (rank " +
                     std::to_string(q) + ")";
      }
      break;
    }
  }
  REPRISE_CHECK(count == 0, "replica check on rank ", rank(), " of ", size(), ": ", count,
                " replicated parameter(s) differ from rank 0's: ", differing,
                count > 3 ? ", ..." : "");
}

}  // namespace reprise::parallel
