#pragma once
// The shared parameters of a run split over processes (ZeRO-3, FSDP-style:
// --shard parameters): each process keeps only its blocks of them
// (nn/shard_layout.h), and a unit's parameters (one decoder layer's, or
// the rest of the model's) are whole only while they are needed.
//
// A unit is all-gathered just before its forward and given back after it
// (the parameters' storages are evicted: engine/storage.h, so reading one
// outside its gather is an Error). For backward it is gathered again when
// backward reaches the unit's output, which is also before a checkpointed
// layer's replay, so one gather serves the replay and the backward; it is
// given back once every one of its parameters' gradients is in. Gathered
// values are the owners' bits, so the tape's saved references read what the
// forward read, and a split run computes one process's bits.
//
// The optimizer updates the blocks (OptimizerShard::param_blocks); the
// next gather spreads the update.

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "autograd/node.h"
#include "nn/llama.h"
#include "nn/shard_layout.h"

namespace reprise::nn {

class ParameterShards {
 public:
  // Every block's all-gather, (m) on every process -> (R, m), in turn, on
  // a thread and a communicator of its own; collective. One call is in
  // flight at a time.
  using AllGatherAsync = std::function<std::future<std::vector<Tensor>>(std::vector<Tensor>)>;

  // `layout` cuts its buckets at unit boundaries (Bucket::unit): units 0
  // .. U - 2 are the decoder layers in order, unit U - 1 the rest of the
  // model. The parameters are whole when this is built, and are given back
  // to blocks.
  ParameterShards(ShardLayout layout, int rank, AllGatherAsync all_gather);
  ParameterShards(const ParameterShards&) = delete;
  ParameterShards& operator=(const ParameterShards&) = delete;

  size_t num_units() const { return units_.size(); }
  // Unit u's parameters whole (collective; nothing when they are): from
  // its prefetch when one is under way, else gathered now.
  void gather(size_t unit);
  // Starts gathering unit u while the caller computes (collective; nothing
  // when it is whole or on its way). A prefetch under way for another unit
  // is completed first.
  void prefetch(size_t unit);
  // Unit u's parameters given back (nothing when they are).
  void release(size_t unit);
  void release_all();
  // Every process's blocks of the shared parameters, per bucket (m, kind
  // parameter): what the optimizer updates.
  std::vector<Tensor>& blocks() { return blocks_; }
  const ShardLayout& layout() const { return layout_; }

  // A LayerRunner around `inner` for decoder layer i (unit i): gathers the
  // layer before it runs (prefetching layer i + 1 meanwhile) and gives it
  // back after, and records on its output an identity whose backward
  // gathers it again (prefetching layer i - 1).
  LlamaForCausalLM::LayerRunner runner(LlamaForCausalLM::LayerRunner inner);
  // While it lives (around a backward), gives back each unit once all its
  // parameters' gradients are in.
  std::unique_ptr<autograd::GradReadyHook> release_when_done();

  // Every parameter whole while it lives (collective), to read or write
  // them all (checkpoints, export, loading weights); at its end every
  // process takes its blocks from the parameters (so what was written
  // into them is kept) and gives them back.
  class Whole {
   public:
    explicit Whole(ParameterShards* shards);
    ~Whole();
    Whole(const Whole&) = delete;
    Whole& operator=(const Whole&) = delete;

   private:
    ParameterShards* shards_;
  };

  // Bytes this process received in gathers, and seconds it waited for
  // them (what prefetching did not hide), since the last reset.
  int64_t gathered_bytes() const { return gathered_bytes_; }
  double gather_seconds() const { return gather_seconds_; }
  void reset_counts() {
    gathered_bytes_ = 0;
    gather_seconds_ = 0;
  }

 private:
  // The blocks from the (whole) parameters, then the parameters given back.
  void scatter();
  // Waits for the prefetch under way and makes its unit whole.
  void complete_prefetch();

  ShardLayout layout_;
  int rank_;
  AllGatherAsync all_gather_;
  size_t layers_ = 0;  // units 0 .. layers_ - 1 are decoder layers, in order
  std::optional<size_t> pending_unit_;
  std::future<std::vector<Tensor>> pending_;
  std::vector<ShardLayout::Piece> pieces_;
  std::vector<Tensor> blocks_;
  std::vector<std::vector<size_t>> units_;                  // per unit, its buckets
  std::vector<size_t> unit_of_;                             // per shared parameter
  std::vector<size_t> unit_params_;                         // per unit, its parameters
  std::unordered_map<const TensorImpl*, size_t> index_of_;  // leaf -> shared parameter
  std::vector<bool> gathered_;                              // per unit
  int64_t gathered_bytes_ = 0;
  double gather_seconds_ = 0;
};

}  // namespace reprise::nn
