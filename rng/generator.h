#pragma once
// A Generator is a seed and a set of named streams. Each stream is a
// subsequence of the seed's Philox sequence and a monotone counter: a random
// op reserves exactly the words it needs (a function of its shape only),
// records the Reservation on its tape node, and reads those words again on
// replay. Nothing else is stateful, so (seed, offset per stream) is the whole
// state: saving and restoring it resumes a run bit for bit.
//
// A stream's subsequence is a function of its name alone ("default" is
// subsequence 0, any other name its 64-bit FNV-1a hash), so a stream's words
// do not depend on the order in which streams are first used.
//
// Random numbers are keyed by sample, not by process: while a SampleSlice
// says that this process computes samples [first, first + count) of a global
// batch of `total`, each reservation is cut from the one the whole batch
// would make, so a sample reads the same words whether one process runs the
// whole batch, several run a slice each (data parallel), or one runs it as
// micro-batches (gradient accumulation).
//
// Reservations are rounded up to whole Philox blocks (4 words), so every
// reservation starts at a block boundary: fill kernels never start mid-block,
// a CUDA thread can own whole blocks, and Box-Muller pairs never straddle two
// reservations. The cost is at most 3 unused words per op. (A sample slice's
// cut of a reservation starts where its first sample's words do, inside a
// block when a sample's words are not a multiple of 4; the ops that draw
// under slices, dropout and attention dropout, read one word per element
// from any offset.)

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rng/reservation.h"

namespace reprise::rng {

// Everything that determines a Generator's future output.
struct GeneratorState {
  struct Stream {
    std::string name;
    uint64_t offset = 0;  // next unreserved word, a multiple of 4
    friend bool operator==(const Stream&, const Stream&) = default;
  };
  uint64_t seed = 0;
  std::vector<Stream> streams;  // in order of first use; the index is Reservation::stream

  friend bool operator==(const GeneratorState&, const GeneratorState&) = default;

  // A versioned little-endian encoding (for checkpoints); from_bytes throws
  // reprise::Error on anything malformed.
  std::vector<uint8_t> to_bytes() const;
  static GeneratorState from_bytes(const uint8_t* data, size_t size);
};

// Samples [first, first + count) of a global batch of `total` samples.
struct SampleSlice {
  uint64_t first = 0;
  uint64_t count = 1;
  uint64_t total = 1;
};

class Generator {
 public:
  // An arbitrary fixed seed (the 64-bit golden ratio), so an unseeded run is
  // as reproducible as a seeded one.
  static constexpr uint64_t kDefaultSeed = 0x9E3779B97F4A7C15ull;

  explicit Generator(uint64_t seed = kDefaultSeed);
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  uint64_t seed() const;

  // Forgets every stream and starts over under `seed`.
  void manual_seed(uint64_t seed);

  // Reserves the next `words` words of `stream` (rounded up to a multiple of
  // 4) and returns their exact range; the stream is created at offset 0 on
  // first use. Thread-safe.
  Reservation reserve(std::string_view stream, uint64_t words);

  // While a slice is set, reserve(stream, words) takes `words` as `count`
  // equal per-sample parts (the batch is the outermost dimension of every
  // random op: dropout and attention dropout over (B, ...), two words per
  // sample for the data loader), advances the stream by `total` parts (as
  // the whole batch would) and returns the words of samples [first, first +
  // count). Such a reservation may start inside a Philox block; kernels read
  // word offset + i either way. A slice with count == total changes
  // nothing. Raises when `words` is not a multiple of count.
  void set_sample_slice(std::optional<SampleSlice> slice);
  std::optional<SampleSlice> sample_slice() const;

  // The next unreserved word of `stream` (0 for a stream not used yet).
  uint64_t offset(std::string_view stream) const;

  GeneratorState state() const;
  // Replaces the whole state; checks that offsets are block-aligned and that
  // names (and their subsequences) are distinct.
  void set_state(const GeneratorState& state);

  // The subsequence a stream name maps to.
  static uint64_t subsequence_of(std::string_view name);

 private:
  mutable std::mutex mutex_;
  GeneratorState state_;
  std::optional<SampleSlice> slice_;
};

// Sets a generator's sample slice for a scope, and restores the previous one.
class SampleSliceGuard {
 public:
  SampleSliceGuard(Generator& gen, SampleSlice slice);
  ~SampleSliceGuard();
  SampleSliceGuard(const SampleSliceGuard&) = delete;
  SampleSliceGuard& operator=(const SampleSliceGuard&) = delete;

 private:
  Generator& gen_;
  std::optional<SampleSlice> previous_;
};

// The process-wide generator that random ops use when given none.
Generator& default_generator();
// A handle to it, for what keeps a generator past the call that names one
// (a checkpoint region's replay, a model's dropout, LayerCheckpointing):
// those hold a std::shared_ptr<Generator>, so the generator lives as long
// as they do.
std::shared_ptr<Generator> default_generator_handle();

}  // namespace reprise::rng
