#pragma once
// The recompute verifier compares what a checkpoint replay produces with
// what the forward produced, node by node:
//   metadata: shape and dtype of every replayed output;
//   bitwise:  a 64-bit hash of every replayed output's bytes, plus (for the
//             report) a reference copy of the forward value, so a mismatch
//             reports how many elements differ and by how many ulps.
// Bitwise keeps those reference copies as MemoryKind::temporary: it is a
// study tool and costs memory; metadata costs nothing measurable.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace reprise::autograd {

enum class Verify { none, metadata, bitwise };
enum class OnMismatch { raise, report };

const char* verify_name(Verify v);

struct Mismatch {
  std::string region;  // checkpoint region scope
  std::string scope;   // scope of the diverging node
  std::string op;
  uint32_t output = 0;
  std::string expected;  // "f32[4, 8] cpu"
  std::string actual;
  int64_t differing = -1;  // elements that differ (-1: metadata mismatch)
  double max_ulp = 0;      // largest distance in units in the last place
  std::string describe() const;
};

// Fingerprint of one forward output.
struct Fingerprint {
  Shape shape;
  DType dtype = DType::f32;
  uint64_t hash = 0;
  Tensor reference;  // bitwise only

  static Fingerprint of(const Tensor& t, Verify mode);
  // Empty when `replayed` matches.
  std::optional<Mismatch> compare(const Tensor& replayed, Verify mode) const;
};

// 64-bit hash of the values of t (row-major order; any layout).
uint64_t hash_values(const Tensor& t);
// Number of differing elements and the largest ulp distance between two
// same-shape floating tensors (bit-pattern order; NaNs compare by bits).
std::pair<int64_t, double> ulp_difference(const Tensor& a, const Tensor& b);

// Mismatches reported (OnMismatch::report) on this thread since the last call.
std::vector<Mismatch> take_mismatches();
void report_mismatch(Mismatch m);

}  // namespace reprise::autograd
