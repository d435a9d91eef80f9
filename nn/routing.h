#pragma once
// Routing records: which experts each position of a sequence chose in each
// MoE layer, and how close each choice came to flipping. A rollout records
// them as it samples (nn/rollout.h); a training forward's routing is
// captured the same way (RoutingCapture), so the two can be compared
// (routing_flips), and a training forward can route by a record
// (RoutingReplay, rollout routing replay: "R3").
//
// L = MoE layers, P = positions, k = experts per token.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace reprise::nn {

struct RoutingRecord {
  std::vector<std::string> layers;  // the MoE layers, in forward order ("model.layers.1.mlp")
  int64_t num_experts = 0;          // E
  int64_t k = 0;
  int64_t positions = 0;  // P
  // experts[(t L + l) k + j]: the j-th expert (best first) that position t
  // chose in layer l; E is at most 65536. Position-major, so a record
  // grows by appending.
  std::vector<uint16_t> experts;
  // margin[t L + l]: ops::MoeRoute::margin, the ulps from position t's k-th
  // choice down to the best expert it did not choose (0 or 1: a near-tie).
  std::vector<int64_t> margin;

  // Expert j of position t in layer l.
  int64_t expert(int64_t t, size_t l, int64_t j) const {
    return experts[size_t((t * int64_t(layers.size()) + int64_t(l)) * k + j)];
  }
  // Positions [0, count).
  RoutingRecord first_positions(int64_t count) const;
  // Appends `more`'s positions (the same layers, E and k; an empty record
  // takes them).
  void append(const RoutingRecord& more);
  // Raises an Error naming `what` unless the two records have the same
  // layers, E, k and positions.
  void check_matches(const RoutingRecord& other, const std::string& what) const;
  // Raises an Error naming `what` unless the sizes agree (experts P L k
  // values, margin P L), every id is below E and no position chose an
  // expert twice.
  void validate(const std::string& what) const;
};

// A record from plain integer arrays (another engine's): experts (P, L, k)
// of any integer dtype, best first, and margin (P, L) i64 or undefined (then
// unknown: recorded as 0). Validated.
RoutingRecord routing_record(std::vector<std::string> layers, int64_t num_experts,
                             const Tensor& experts, const Tensor& margin = {});

// Routing records in one safetensors file, a batch's, one per sequence i:
//   "<i>.experts"  U16 (P_i, L, k)   the experts, best first
//   "<i>.margin"   I64 (P_i, L)      the margins in ulps
// with metadata format "reprise.routing_records", version "1", sequences
// (n), layers (the MoE layers' names joined by ','), num_experts (E) and k.
// Written atomically; read back validated, every problem an Error naming
// the file.
void save_routing_records(const std::string& path, const std::vector<RoutingRecord>& records);
std::vector<RoutingRecord> load_routing_records(const std::string& path);

// The (layer, position) pairs whose set of chosen experts differs between
// two records of one sequence (the order within a set aside). Raises when
// they do not match (check_matches).
int64_t routing_flips(const RoutingRecord& a, const RoutingRecord& b);

// Captures the routing of every MoE layer that runs on this thread while it
// lives (nesting: the innermost capture sees it). One forward of input
// (B, T) routes B T tokens in each layer; records() cuts them into the B
// sequences.
class RoutingCapture {
 public:
  RoutingCapture();
  ~RoutingCapture();
  RoutingCapture(const RoutingCapture&) = delete;
  RoutingCapture& operator=(const RoutingCapture&) = delete;

  // Called by each MoE layer: indices (N, k) i64 and margin (N) i64, on any
  // device.
  void routed(const std::string& layer, const Tensor& indices, const Tensor& margin,
              int64_t num_experts);

  // The routing of the one forward captured since the last clear(), of
  // `batch` sequences of `positions` each (N = batch positions in every
  // layer): one record per sequence. Raises when the capture saw another
  // number of tokens or a layer twice.
  std::vector<RoutingRecord> records(int64_t batch, int64_t positions) const;
  // Forgets what was captured.
  void clear() { layers_.clear(); }
  // Stops capturing (the enclosing capture, if any, sees later layers),
  // keeping what was captured; the destructor closes an open capture.
  // Captures may close in any order, on any thread.
  void close();

 private:
  struct Layer {
    std::string name;
    int64_t num_experts;
    std::vector<int64_t> indices;  // (N, k)
    std::vector<int64_t> margin;   // (N)
    int64_t k;
  };
  std::vector<Layer> layers_;
  bool open_ = true;
};

// The capture this thread's MoE layers report to, or nullptr.
RoutingCapture* current_routing_capture();

// Routing replay: while it lives, every MoE layer that runs on this thread
// routes the tokens of a forward of input (B, T) by `records`, one per
// sequence (positions at most T; a sequence's positions past its record,
// padding, route by their scores). The experts are the record's; the gates
// are computed from the current scores of those experts, so the router
// still gets its gradient. Where a layer's own choice equals the record
// for every token, its route is the plain one bit for bit. A checkpointed
// layer's replay repeats what its forward recorded, so it routes by the
// record too.
class RoutingReplay {
 public:
  // Raises an Error unless the records share layers, E and k and each has
  // at most `positions`.
  RoutingReplay(std::vector<RoutingRecord> records, int64_t positions);
  ~RoutingReplay();
  RoutingReplay(const RoutingReplay&) = delete;
  RoutingReplay& operator=(const RoutingReplay&) = delete;

  // The experts of `layer`'s N tokens: (N, k) row-major ids, -1 rows past a
  // record. Raises an Error unless N is B T, the records know the layer and
  // were made for E experts and k per token, and every id is below E.
  std::vector<int64_t> experts(const std::string& layer, int64_t tokens, int64_t num_experts,
                               int64_t k) const;
  // Tokens (over every layer so far) whose own choice the record overrode:
  // the router flips that replay prevented.
  int64_t overridden() const { return overridden_; }
  void count_overridden(int64_t tokens) { overridden_ += tokens; }

 private:
  std::vector<RoutingRecord> records_;
  int64_t positions_;
  int64_t overridden_ = 0;
};

// The replay this thread's MoE layers route by, or nullptr.
RoutingReplay* current_routing_replay();

}  // namespace reprise::nn
