#pragma once
// One token's expert choice for ops::moe_route, written once as REPRISE_HD
// functions that the CPU kernel (cpu/moe_route.cpp) and the CUDA kernel
// (cuda/kernels/moe_route.h) both call, so every backend chooses the same
// experts in the same order and measures the same margin.
//
// E = experts, k = experts per token, G = n_group.

#include <bit>
#include <cstdint>
#include <limits>

#include "base/hd.h"

namespace reprise::route {

// The most expert groups a choice may have (DeepSeek-V3 has 8).
inline constexpr int64_t kMaxGroups = 64;

// moe_route's margin of a token whose choice had no unchosen candidate.
inline constexpr int64_t kNoRunnerUp = std::numeric_limits<int64_t>::max();

// Inserts (v, e) into the best-first list val/idx of `filled` of at most k
// entries: larger values first, equal values by lower index (ops::topk's
// order). Returns the new fill.
template <class T>
REPRISE_HD int64_t insert_best(T v, int64_t e, T* val, int64_t* idx, int64_t filled, int64_t k) {
  if (filled == k && !(v > val[k - 1])) return filled;
  int64_t p = filled < k ? filled++ : k - 1;
  for (; p > 0 && v > val[p - 1]; --p) {
    val[p] = val[p - 1];
    idx[p] = idx[p - 1];
  }
  val[p] = v;
  idx[p] = e;
  return filled;
}

// The bits of a float or double as an integer ordered like the values
// (sign and magnitude: +0 and -0 both map to 0).
template <class T>
REPRISE_HD int64_t ordered(T v) {
  if constexpr (sizeof(T) == 4) {
    const uint32_t b = std::bit_cast<uint32_t>(v);
    const int64_t magnitude = int64_t(b & 0x7fffffffu);
    return (b >> 31) ? -magnitude : magnitude;
  } else {
    const uint64_t b = std::bit_cast<uint64_t>(v);
    const int64_t magnitude = int64_t(b & 0x7fffffffffffffffull);
    return (b >> 63) ? -magnitude : magnitude;
  }
}

// How many representable values lie from lo up to hi >= lo: 0 when equal,
// 1 for neighbours (at most int64's largest).
template <class T>
REPRISE_HD int64_t ulps_apart(T hi, T lo) {
  const uint64_t d = uint64_t(ordered(hi)) - uint64_t(ordered(lo));  // exact modulo 2^64
  return d > uint64_t(kNoRunnerUp) ? kNoRunnerUp : int64_t(d);
}

// Chooses the k experts of a token with scores row (E) and, when bias is
// not null, a per-expert bias (E): the k largest choice values row[e] +
// bias[e] (ties: lower expert), among the topk_group best of the n_group
// groups of E / n_group consecutive experts, a group's value being its two
// best choice values summed (ties: lower group). Writes idx (k), the chosen
// experts best first, and val (k), their choice values. No value may be
// NaN (the callers check).
//
// Returns the token's margin: how many ulps the k-th choice value lies
// above the best choice value of an expert of the chosen groups that was
// not chosen (kNoRunnerUp when every such expert was chosen). A margin of
// 0 or 1 is a near-tie: a change of one ulp in the scores may swap them.
template <class T>
REPRISE_HD int64_t choose_experts(const T* row, const T* bias, int64_t E, int64_t k,
                                  int64_t n_group, int64_t topk_group, int64_t* idx, T* val) {
  auto choice = [&](int64_t e) { return bias ? row[e] + bias[e] : row[e]; };
  const int64_t per_group = E / n_group;
  uint64_t chosen_groups = ~uint64_t(0);  // bit g: group g's experts may be chosen
  if (n_group > 1) {
    T group_val[kMaxGroups];
    int64_t group_idx[kMaxGroups];
    int64_t groups = 0;
    for (int64_t g = 0; g < n_group; ++g) {
      T pair[2];
      int64_t pair_idx[2];
      int64_t filled = 0;
      for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
        filled = insert_best(choice(e), e, pair, pair_idx, filled, int64_t(2));
      }
      groups = insert_best(T(pair[0] + pair[1]), g, group_val, group_idx, groups, topk_group);
    }
    chosen_groups = 0;
    for (int64_t j = 0; j < topk_group; ++j) chosen_groups |= uint64_t(1) << group_idx[j];
  }
  auto eligible = [&](int64_t e) { return ((chosen_groups >> (e / per_group)) & 1) != 0; };
  int64_t filled = 0;
  for (int64_t e = 0; e < E; ++e) {
    if (eligible(e)) filled = insert_best(choice(e), e, val, idx, filled, k);
  }
  // The runner-up: the first best eligible expert not chosen.
  bool found = false;
  T runner = T(0);
  for (int64_t e = 0; e < E; ++e) {
    if (!eligible(e)) continue;
    bool taken = false;
    for (int64_t j = 0; j < k; ++j) taken = taken || idx[j] == e;
    if (taken) continue;
    const T v = choice(e);
    if (!found || v > runner) runner = v;
    found = true;
  }
  return found ? ulps_apart(val[k - 1], runner) : kNoRunnerUp;
}

}  // namespace reprise::route
