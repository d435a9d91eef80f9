#include "parallel/gradient_buckets.h"

#include <algorithm>
#include <utility>

#include "engine/grad_mode.h"
#include "engine/memory_stats.h"

namespace reprise::parallel {

const char* reduction_name(Reduction r) {
  return r == Reduction::all_reduce ? "all-reduce" : "reduce-scatter";
}

GradientBuckets::GradientBuckets(std::unique_ptr<Communicator> comm, nn::ShardLayout layout,
                                 Reduction reduction)
    : comm_(std::move(comm)), layout_(std::move(layout)), reduction_(reduction) {
  REPRISE_CHECK(layout_.ranks == 1 || layout_.ranks == comm_->size(), "GradientBuckets: a layout ",
                "for ", layout_.ranks, " ranks over ", comm_->size());
  REPRISE_CHECK(reduction_ == Reduction::all_reduce || layout_.ranks == comm_->size(),
                "GradientBuckets: reduce_scatter needs a layout for the ", comm_->size(), " ranks");
  const std::vector<nn::NamedParameter>& params = layout_.params;
  bucket_of_.resize(params.size());
  ready_.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i].value;
    REPRISE_CHECK(p.device() == comm_->device(), "GradientBuckets: parameter '", params[i].name,
                  "' must be on ", to_string(comm_->device()), ", got ", p.describe());
    param_of_[p.impl()] = i;
  }
  for (size_t b = 0; b < layout_.buckets.size(); ++b) {
    for (const size_t i : layout_.buckets[b].params) bucket_of_[i] = b;
  }
  buckets_.resize(layout_.buckets.size());
  worker_ = std::thread([this] { work(); });
}

GradientBuckets::~GradientBuckets() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

double GradientBuckets::Timing::busy() const {
  double total = 0;
  for (const BucketTiming& b : buckets) total += b.end - b.start;
  return total;
}

double GradientBuckets::Timing::busy_during_backward() const {
  double total = 0;
  for (const BucketTiming& b : buckets)
    total += std::max(0.0, std::min(b.end, backward_end) - b.start);
  return total;
}

double GradientBuckets::since_begin() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count();
}

void GradientBuckets::begin() {
  REPRISE_CHECK(!hook_, "GradientBuckets::begin: called twice without finish()");
  std::fill(ready_.begin(), ready_.end(), false);
  for (Bucket& b : buckets_) b.arrived = 0;
  next_ = 0;
  timing_ = Timing{};
  timing_.buckets.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const nn::ShardLayout::Bucket& layout = layout_.buckets[b];
    timing_.buckets[b].bytes = 4 * (layout.elements() + int64_t(layout.params.size()));
  }
  begin_ = std::chrono::steady_clock::now();
  hook_.emplace([this](const Tensor& leaf) { on_grad(leaf); });
}

void GradientBuckets::on_grad(const Tensor& leaf) {
  const auto it = param_of_.find(leaf.impl());
  if (it == param_of_.end()) return;  // not replicated (an expert of this process)
  const size_t i = it->second;
  REPRISE_CHECK(!ready_[i], "GradientBuckets: a second gradient of '", layout_.params[i].name,
                "' arrived in one backward, after its bucket may have been reduced");
  ready_[i] = true;
  ++buckets_[bucket_of_[i]].arrived;
  while (next_ < buckets_.size() &&
         buckets_[next_].arrived == layout_.buckets[next_].params.size()) {
    launch(next_++);
  }
}

void GradientBuckets::launch(size_t index) {
  Bucket& b = buckets_[index];
  const nn::ShardLayout::Bucket& layout = layout_.buckets[index];
  const int64_t elements = layout.elements(), n = int64_t(layout.params.size());
  NoGradGuard no_grad;
  if (reduction_ == Reduction::reduce_scatter && n == 1 && send_as_is(b, layout)) {
    enqueue(index);
    return;
  }
  b.flat = Tensor::empty({elements + n}, DType::f32, comm_->device());
  b.flat.storage()->set_kind(MemoryKind::gradient);
  // Every element is written once: a gradient or zeros where there is none,
  // zeros in the alignment gaps and the tail, then the presence flags.
  int64_t written = 0;
  auto zero_up_to = [&](int64_t end) {
    if (end > written) b.flat.slice(0, written, end).zero_();
  };
  for (size_t k = 0; k < layout.params.size(); ++k) {
    Tensor leaf = layout_.params[layout.params[k]].value;
    const Tensor g = leaf.grad();
    zero_up_to(layout.offset[k]);
    Tensor dst = layout_.in_bucket(b.flat, index, k);
    written = layout.offset[k] + leaf.numel();
    b.flat.slice(0, elements + int64_t(k), elements + int64_t(k) + 1)
        .fill_(g.defined() ? 1.0 : 0.0);
    if (!g.defined()) {
      dst.zero_();
      continue;
    }
    dst.copy_(g);
    // Backward is done with it (a second gradient is an error). With
    // all_reduce the view replaces it and the worker sums it in place;
    // with reduce_scatter only this rank's block of the sum is kept.
    leaf.set_grad(reduction_ == Reduction::all_reduce ? dst : Tensor());
  }
  zero_up_to(elements);
  enqueue(index);
}

bool GradientBuckets::send_as_is(Bucket& b, const nn::ShardLayout::Bucket& layout) {
  Tensor leaf = layout_.params[layout.params.front()].value;
  const Tensor g = leaf.grad();
  if (!g.defined() || !g.is_contiguous() || g.numel() != layout.elements()) return false;
  // The worker only reads it: the reduce-scatter writes its sums elsewhere.
  b.flat = g.view({g.numel()});
  b.flags = Tensor::full({1}, 1.0, DType::f32, comm_->device());
  leaf.set_grad(Tensor());
  return true;
}

void GradientBuckets::enqueue(size_t index) {
  std::lock_guard lock(mutex_);
  timing_.buckets[index].ready = since_begin();
  queue_.push_back(index);
  ++busy_;
  wake_.notify_one();
}

void GradientBuckets::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;  // what is queued stays unreduced
    const size_t index = queue_.front();
    queue_.pop_front();
    // After a failure the communicator refuses work; the rest is skipped.
    if (!failure_) {
      lock.unlock();
      const double start = since_begin();
      std::exception_ptr failure;
      try {
        reduce(index);
      } catch (...) {
        failure = std::current_exception();
      }
      const double end = since_begin();
      lock.lock();
      timing_.buckets[index].start = start;
      timing_.buckets[index].end = end;
      if (failure && !failure_) failure_ = failure;
    }
    if (--busy_ == 0) idle_.notify_all();
  }
}

void GradientBuckets::reduce(size_t index) {
  Bucket& b = buckets_[index];
  const nn::ShardLayout::Bucket& layout = layout_.buckets[index];
  const int64_t elements = layout.elements(), r = comm_->rank();
  // The flags follow the gradients in the buffer, unless it was a gradient
  // sent as it is (send_as_is).
  Tensor flags = b.flags.defined() ? b.flags : b.flat.slice(0, elements, b.flat.numel());
  if (reduction_ == Reduction::all_reduce) {
    comm_->all_reduce(b.flat);
    // Split optimizer state reads its block; unsplit, nothing does (a view
    // kept here would keep the gradients alive past the optimizer).
    if (layout_.ranks > 1) b.block = b.flat.slice(0, r * layout.block, (r + 1) * layout.block);
    b.flags = flags;
    return;
  }
  NoGradGuard no_grad;
  b.block = comm_->reduce_scatter(b.flat.slice(0, 0, elements));
  b.block.storage()->set_kind(MemoryKind::gradient);
  comm_->all_reduce(flags);
  b.flags = flags.clone();
  b.flat = Tensor();
}

void GradientBuckets::finish() {
  REPRISE_CHECK(hook_, "GradientBuckets::finish: begin() was not called");
  timing_.backward_end = since_begin();
  hook_.reset();
  while (next_ < buckets_.size()) launch(next_++);
  {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return busy_ == 0; });
    if (failure_) std::rethrow_exception(failure_);
  }
  // With all_reduce a gradient that only other ranks had becomes its sum
  // too; the buffers live on in the gradients (views), until the optimizer
  // drops them.
  sums_.blocks.clear();
  sums_.present.assign(layout_.params.size(), false);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const nn::ShardLayout::Bucket& layout = layout_.buckets[b];
    const std::vector<float> flags = buckets_[b].flags.to_vector<float>();
    for (size_t k = 0; k < layout.params.size(); ++k) {
      const size_t i = layout.params[k];
      sums_.present[i] = flags[k] > 0;
      Tensor leaf = layout_.params[i].value;
      if (reduction_ == Reduction::all_reduce && sums_.present[i] && !leaf.grad().defined()) {
        leaf.set_grad(layout_.in_bucket(buckets_[b].flat, b, k));
      }
    }
    sums_.blocks.push_back(std::move(buckets_[b].block));
    buckets_[b] = Bucket{};
  }
  timing_.done = since_begin();
}

nn::ShardGradients GradientBuckets::take_gradients() { return std::exchange(sums_, {}); }

}  // namespace reprise::parallel
