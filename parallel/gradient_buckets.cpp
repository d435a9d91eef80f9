#include "parallel/gradient_buckets.h"

#include <algorithm>

#include "engine/grad_mode.h"
#include "engine/memory_stats.h"

namespace reprise::parallel {

GradientBuckets::GradientBuckets(std::unique_ptr<Communicator> comm,
                                 std::vector<nn::NamedParameter> params, int64_t bucket_bytes)
    : comm_(std::move(comm)), params_(std::move(params)) {
  REPRISE_CHECK(bucket_bytes >= 1, "GradientBuckets: bucket_bytes must be >= 1, got ",
                bucket_bytes);
  bucket_of_.resize(params_.size());
  ready_.resize(params_.size());
  // Reverse parameter order, cut where a bucket reaches bucket_bytes.
  std::vector<std::vector<size_t>> groups;
  int64_t bytes = bucket_bytes;
  for (size_t i = params_.size(); i-- > 0;) {
    const Tensor& p = params_[i].value;
    REPRISE_CHECK(p.dtype() == DType::f32 && p.is_contiguous() && p.is_leaf() &&
                      p.device() == comm_->device(),
                  "GradientBuckets: parameter '", params_[i].name, "' must be a contiguous f32 ",
                  "leaf on ", to_string(comm_->device()), ", got ", p.describe());
    if (bytes >= bucket_bytes) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(i);
    bytes += int64_t(p.nbytes());
    param_of_[p.impl()] = i;
  }
  for (const std::vector<size_t>& group : groups) {
    Bucket b;
    for (const size_t i : group) {
      b.params.push_back(i);
      b.offset.push_back(b.elements);
      b.elements += params_[i].value.numel();
      bucket_of_[i] = buckets_.size();
    }
    buckets_.push_back(std::move(b));
  }
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
    timing_.buckets[b].bytes = 4 * (buckets_[b].elements + int64_t(buckets_[b].params.size()));
  }
  begin_ = std::chrono::steady_clock::now();
  hook_.emplace([this](const Tensor& leaf) { on_grad(leaf); });
}

void GradientBuckets::on_grad(const Tensor& leaf) {
  const auto it = param_of_.find(leaf.impl());
  if (it == param_of_.end()) return;  // not replicated (an expert of this process)
  const size_t i = it->second;
  REPRISE_CHECK(!ready_[i], "GradientBuckets: a second gradient of '", params_[i].name,
                "' arrived in one backward, after its bucket may have been reduced");
  ready_[i] = true;
  ++buckets_[bucket_of_[i]].arrived;
  while (next_ < buckets_.size() && buckets_[next_].arrived == buckets_[next_].params.size()) {
    launch(next_++);
  }
}

void GradientBuckets::launch(size_t index) {
  Bucket& b = buckets_[index];
  NoGradGuard no_grad;
  b.flat = Tensor::empty({b.elements + int64_t(b.params.size())}, DType::f32, comm_->device());
  b.flat.storage()->set_kind(MemoryKind::gradient);
  for (size_t k = 0; k < b.params.size(); ++k) {
    Tensor leaf = params_[b.params[k]].value;
    const Tensor g = leaf.grad();
    Tensor dst = b.flat.slice(0, b.offset[k], b.offset[k] + leaf.numel()).view(leaf.shape());
    Tensor flag = b.flat.slice(0, b.elements + int64_t(k), b.elements + int64_t(k) + 1);
    if (g.defined()) {
      dst.copy_(g);
      flag.fill_(1.0);
      // Backward is done with it (a second gradient is an error): the
      // view replaces it, and the worker sums it in place.
      leaf.set_grad(dst);
    } else {
      dst.zero_();
      flag.zero_();
    }
  }
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
        comm_->all_reduce(buckets_[index].flat);
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
  // A gradient that only other ranks had becomes its sum too; the buffers
  // live on in the gradients (views), until the optimizer drops them.
  for (Bucket& b : buckets_) {
    const std::vector<float> flags = b.flat.slice(0, b.elements, b.flat.numel()).to_vector<float>();
    for (size_t k = 0; k < b.params.size(); ++k) {
      Tensor leaf = params_[b.params[k]].value;
      if (flags[k] > 0 && !leaf.grad().defined()) {
        leaf.set_grad(b.flat.slice(0, b.offset[k], b.offset[k] + leaf.numel()).view(leaf.shape()));
      }
    }
    b.flat = Tensor();
  }
  timing_.done = since_begin();
}

}  // namespace reprise::parallel
