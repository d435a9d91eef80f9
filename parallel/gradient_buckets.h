#pragma once
// Data-parallel gradient reduction in fixed buckets that start while
// backward runs.
//
// The replicated parameters, in reverse order (roughly the order backward
// finishes them: the head first, the embedding last), are cut into buckets
// of about `bucket_bytes`. Between begin() and finish(), autograd's
// GradReadyHook reports each gradient backward finishes; once every
// gradient of a bucket is in and every earlier bucket has started, the
// bucket's gradients move into one new flat buffer (with one presence flag
// per parameter; each gradient becomes a view of it, so the memory is not
// held twice) and a worker thread sums the buffer over the ranks in place
// (Communicator::all_reduce: in rank order) while backward goes on.
// finish() starts what is left (a parameter without a gradient sends
// zeros) and waits: each gradient is then its sum, or undefined when no
// rank had one (so the optimizer skips it as it would in one process).
// Every rank reduces the buckets in index order, so the results never
// depend on timing.
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
#include "nn/module.h"
#include "parallel/communicator.h"

namespace reprise::parallel {

class GradientBuckets {
 public:
  // `comm` is the worker's own; params are f32 leaves on its device.
  GradientBuckets(std::unique_ptr<Communicator> comm, std::vector<nn::NamedParameter> params,
                  int64_t bucket_bytes);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Call before a backward whose gradients are the step's last (the last
  // micro-batch's): its finished gradients start their buckets. On the
  // thread that runs backward.
  void begin();
  // After that backward: every replicated gradient holds its sum over the
  // ranks. Rethrows a failure of the worker's collectives.
  void finish();

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
    std::vector<size_t> params;   // indices into params_, in bucket order
    std::vector<int64_t> offset;  // of each parameter in `flat`
    int64_t elements = 0;         // of the parameters together
    Tensor flat;  // (elements + params) f32 from launch to finish: gradients, presence flags
    size_t arrived = 0;
  };
  void on_grad(const Tensor& leaf);
  void launch(size_t bucket);  // moves the gradients in and queues the bucket
  void work();                 // the worker thread
  double since_begin() const;

  std::unique_ptr<Communicator> comm_;
  std::vector<nn::NamedParameter> params_;
  std::unordered_map<const TensorImpl*, size_t> param_of_;  // leaf -> index
  std::vector<size_t> bucket_of_;                           // param index -> bucket
  std::vector<Bucket> buckets_;
  std::vector<bool> ready_;  // per parameter, this backward
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
