#pragma once
// Data-parallel gradient reduction in fixed buckets that start while
// backward runs.
//
// The buckets are a ShardLayout's (nn/shard_layout.h): the shared
// parameters in reverse order (roughly the order backward finishes them:
// the head first, the embedding last), cut at about `bucket_bytes`.
// Between begin() and finish(), autograd's GradReadyHook reports each
// gradient backward finishes; once every gradient of a bucket is in and
// every earlier bucket has started, the bucket's gradients move into one
// new flat buffer (with one presence flag per parameter) and a worker
// thread reduces it over the ranks while backward goes on, one of two ways:
//   - all_reduce: every rank gets the whole sum in place
//     (Communicator::all_reduce: in rank order); each gradient becomes a
//     view of the buffer, so the memory is not held twice;
//   - reduce_scatter: rank r gets only block r of the sum (ZeRO-2), the
//     same bits as all_reduce's; the buffer and the gradients are dropped
//     once it is sent, so a rank keeps 1/R of the summed gradients.
// finish() starts what is left (a parameter without a gradient sends
// zeros) and waits. With all_reduce each gradient is then its sum, or
// undefined when no rank had one (so the optimizer skips it as it would in
// one process); take_gradients() gives the rank's blocks either way. Every
// rank reduces the buckets in index order, so the results never depend on
// timing.
//
// The worker drives its own communicator (a duplicate of the training
// thread's), so expert-parallel exchanges on the training thread never mix
// with bucket messages.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "autograd/node.h"
#include "nn/shard_layout.h"
#include "parallel/communicator.h"

namespace reprise::parallel {

enum class Reduction { all_reduce, reduce_scatter };
// "all-reduce" | "reduce-scatter"
const char* reduction_name(Reduction r);

class GradientBuckets {
 public:
  // `comm` is the worker's own; the layout's ranks are 1 or comm's, and
  // its parameters f32 leaves on comm's device.
  GradientBuckets(std::unique_ptr<Communicator> comm, nn::ShardLayout layout, Reduction reduction);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Call before a backward whose gradients are the step's last (the last
  // micro-batch's): its finished gradients start their buckets. On the
  // thread that runs backward.
  void begin();
  // After that backward: the sums are in (every shared gradient with
  // all_reduce, this rank's blocks with reduce_scatter). Rethrows a
  // failure of the worker's collectives.
  void finish();
  // This rank's blocks of the last finish()'s sums and the presence flags;
  // they are handed over (a second call gets none). With all_reduce the
  // blocks are views of the gradients, and undefined when the layout is
  // for one rank.
  nn::ShardGradients take_gradients();
  const nn::ShardLayout& layout() const { return layout_; }
  Reduction reduction() const { return reduction_; }

  // When each bucket of the last begin() .. finish() ran, in seconds from
  // begin(): `ready` when its last gradient arrived (or finish() started
  // it), `start` and `end` of its all_reduce on the worker.
  struct BucketTiming {
    int64_t bytes = 0;
    double ready = 0, start = 0, end = 0;
  };
  struct Timing {
    std::vector<BucketTiming> buckets;
    double backward_end = 0;  // when finish() was called
    double done = 0;          // when it returned

    // Seconds the worker spent in all-reduces; the part of it before
    // backward ended (overlapped); and how long finish() waited.
    double busy() const;
    double busy_during_backward() const;
    double wait_after_backward() const { return done - backward_end; }
  };
  const Timing& last_timing() const { return timing_; }
  size_t num_buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    // (elements + params) f32, the gradients then the presence flags: from
    // launch to finish with all_reduce, to the end of the worker's
    // reduction with reduce_scatter, which leaves its results in
    Tensor flat;
    Tensor block;  // (m): this rank's block of the sums
    Tensor flags;  // (params): the summed presence flags
    size_t arrived = 0;
  };
  void reduce(size_t bucket);  // on the worker
  void on_grad(const Tensor& leaf);
  void launch(size_t bucket);  // moves the gradients in and queues the bucket
  // With reduce_scatter, a bucket of one gradient that fills it exactly (no
  // padding: a large weight such as the embedding) sends the gradient
  // itself, saving a copy of its bytes; false when it does not fit so.
  bool send_as_is(Bucket& b, const nn::ShardLayout::Bucket& layout);
  void enqueue(size_t bucket);  // hands a launched bucket to the worker
  void work();                  // the worker thread
  double since_begin() const;

  std::unique_ptr<Communicator> comm_;
  nn::ShardLayout layout_;
  Reduction reduction_;
  std::unordered_map<const TensorImpl*, size_t> param_of_;  // leaf -> index
  std::vector<size_t> bucket_of_;                           // param index -> bucket
  std::vector<Bucket> buckets_;
  std::vector<bool> ready_;  // per parameter, this backward
  nn::ShardGradients sums_;  // from finish() to take_gradients()
  size_t next_ = 0;          // the next bucket to launch
  std::optional<autograd::GradReadyHook> hook_;
  std::chrono::steady_clock::time_point begin_;
  Timing timing_;

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<size_t> queue_;  // launched buckets the worker has not taken
  size_t busy_ = 0;           // buckets queued or running
  bool stop_ = false;
  std::exception_ptr failure_;
  std::thread worker_;
};

}  // namespace reprise::parallel
