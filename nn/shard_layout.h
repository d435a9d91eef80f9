#pragma once
// Where the shared parameters' elements sit when data parallelism splits
// them over R processes (ZeRO's flat shards), and the gradients each
// process receives for its share.
//
// The shared parameters, in reverse order (roughly the order backward
// finishes them), are cut into buckets of about `bucket_bytes`. A bucket is
// one flat buffer of R blocks of equal length; process r owns block r,
// elements [r m, (r + 1) m). With `align` > 1 every parameter starts at a
// multiple of `align` in its bucket and m is a multiple of it too (the
// rest is zero padding), so a block boundary never cuts an aligned chunk
// of a parameter: with align = kGradNormChunk each process can sum the
// squares of its chunks as one process sums them (grad_square_sums).
//
// A piece is the part of one parameter inside this process's block:
// elements [begin, end) of the parameter (flattened), at `at` in the
// block. Every element of every shared parameter is in exactly one
// process's pieces.
//
// m = block length, R = ranks.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/tensor.h"
#include "nn/module.h"

namespace reprise::nn {

// What data parallelism splits over the processes (--shard), in these
// blocks: nothing; the optimizer state (ZeRO-1: the gradients are
// all-reduced, each process updates its blocks, and the updated blocks are
// all-gathered); the gradients too (ZeRO-2: a reduce-scatter in place of
// the all-reduce, so each process keeps only its blocks of the sums); or
// the parameters too (ZeRO-3, FSDP-style: nn/parameter_shards.h).
enum class ShardMode { none, optimizer, gradients, parameters };
// "none" | "optimizer" | "gradients" | "parameters"; an Error for anything
// else.
ShardMode parse_shard_mode(const std::string& name);
const char* shard_mode_name(ShardMode m);

// The chunk length of grad_square_sums (nn/optim.h), in elements.
inline constexpr int64_t kGradNormChunk = kSquareSumChunk;

struct ShardLayout {
  struct Bucket {
    std::vector<size_t> params;   // indices into `params`, in bucket order
    std::vector<int64_t> offset;  // of each in the bucket's buffer
    int ranks = 1;
    size_t unit = 0;    // the parameters' unit (build's `unit`)
    int64_t block = 0;  // m: elements per process
    int64_t elements() const { return block * ranks; }
  };
  struct Piece {
    size_t param;   // index into `params`
    size_t bucket;  // the bucket it is in
    int64_t begin, end;
    int64_t at;  // where it starts in the block
    int64_t size() const { return end - begin; }
    // The piece's elements (1-D views): of a block (m) of its bucket, and
    // of a tensor shaped as its parameter.
    Tensor in_block(const Tensor& block) const { return block.slice(0, at, at + size()); }
    Tensor in_param(const Tensor& param) const { return param.view({-1}).slice(0, begin, end); }
  };

  // Buckets of `params` (f32 leaves) as described above; ranks = 1 and
  // align = 1 give the tight buffers of unsplit data parallelism. With
  // `unit` (per parameter: the group it is gathered with), a bucket also
  // ends where the unit changes, so each bucket belongs to one unit.
  static ShardLayout build(std::vector<NamedParameter> params, int64_t bucket_bytes, int ranks,
                           int64_t align, const std::vector<size_t>& unit = {});

  // The pieces of process `rank`, bucket by bucket.
  std::vector<Piece> pieces(int rank) const;
  // Parameter j of bucket b (params[buckets[b].params[j]]) in a buffer laid
  // out as that bucket (1-D, its elements first): a view of its shape.
  Tensor in_bucket(const Tensor& buffer, size_t b, size_t j) const;

  std::vector<NamedParameter> params;  // the shared parameters
  std::vector<Bucket> buckets;
  int ranks = 1;
};

// This process's share of a step's summed gradients: per bucket its block
// (m, f32: the sums of the elements its pieces cover, zeros in the
// padding), and per shared parameter whether any process had a gradient
// for it (a parameter none had is skipped by the optimizer, as in one
// process).
struct ShardGradients {
  std::vector<Tensor> blocks;
  std::vector<bool> present;
};

}  // namespace reprise::nn
