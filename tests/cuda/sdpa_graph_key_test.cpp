// The host side of bf16/f16 attention on cuDNN (cuda/sdpa_graph_key.h):
// a cached graph's key tells apart every property of a problem that
// changes the graph, the support check names what cuDNN cannot run, and
// dropout's Philox key follows the recorded reservation.
#include "cuda/sdpa_graph_key.h"

#include <gtest/gtest.h>

#include <set>

#include "ops/views.h"

namespace reprise::cuda {
namespace {

Tensor bf16(const Shape& shape) { return Tensor::zeros(shape, DType::bf16); }

TEST(SdpaGraphKey, EveryPropertyOfTheProblemIsPartOfTheKey) {
  const Tensor q = bf16({2, 8, 64, 64}), k = bf16({2, 2, 64, 64}), v = bf16({2, 2, 64, 64});
  const AttentionParams plain{.scale = 0.125, .causal = true};
  std::set<SdpaGraphKey> keys{sdpa_graph_key(q, k, v, plain, false)};
  auto add = [&](const SdpaGraphKey& key) { EXPECT_TRUE(keys.insert(key).second); };
  add(sdpa_graph_key(q, k, v, plain, true));                                            // backward
  add(sdpa_graph_key(q.to(DType::f16), k, v, plain, false));                            // dtype
  add(sdpa_graph_key(bf16({2, 8, 65, 64}), k, v, plain, false));                        // T
  add(sdpa_graph_key(q, bf16({2, 4, 64, 64}), bf16({2, 4, 64, 64}), plain, false));     // Hkv
  add(sdpa_graph_key(q, k, bf16({2, 2, 64, 32}), plain, false));                        // Dv
  add(sdpa_graph_key(ops::transpose(bf16({2, 64, 8, 64}), 1, 2), k, v, plain, false));  // strides
  AttentionParams other = plain;
  other.causal = false;
  add(sdpa_graph_key(q, k, v, other, false));
  other = plain;
  other.causal_offset = 3;
  add(sdpa_graph_key(q, k, v, other, false));
  other = plain;
  other.window = 16;
  add(sdpa_graph_key(q, k, v, other, false));
  other.window = 17;
  add(sdpa_graph_key(q, k, v, other, false));
  other = plain;
  other.scale = 0.1;
  add(sdpa_graph_key(q, k, v, other, false));
  other = plain;
  other.dropout = AttentionDropout{.words = {.seed = 1, .count = 1 << 20}, .p = 0.1};
  add(sdpa_graph_key(q, k, v, other, false));
  // The reservation itself is data, not part of the graph.
  AttentionParams again = other;
  again.dropout->words.offset = 12345;
  EXPECT_EQ(sdpa_graph_key(q, k, v, again, false), sdpa_graph_key(q, k, v, other, false));
  // Without a causal mask the offset does not matter.
  AttentionParams a{.scale = 0.125, .causal = false, .causal_offset = 0};
  AttentionParams b{.scale = 0.125, .causal = false, .causal_offset = 5, .window = 3};
  EXPECT_EQ(sdpa_graph_key(q, k, v, a, false), sdpa_graph_key(q, k, v, b, false));
}

// Whether cuDNN's band keeps key j for query i, as sdpa_graph_key.h states
// it: j <= i + shift + right and j > i + shift - left, shift = S - T when
// aligned bottom-right.
bool band_keeps(const CudnnBand& band, int64_t T, int64_t S, int64_t i, int64_t j) {
  const int64_t shift = band.bottom_right ? S - T : 0;
  return j <= i + shift + band.right && (band.left == 0 || j > i + shift - band.left);
}

// The band keeps exactly the keys the op's mask keeps: j <= i + offset and
// j > i + offset - window, top-left while window > offset, bottom-right
// (the KV cache's alignment, offset = S - T) otherwise.
TEST(SdpaGraphKey, TheBandStatesTheCausalMaskAndTheWindow) {
  struct Case {
    int64_t T, S, offset, window;
    bool bottom_right;
  };
  for (Case c : {Case{64, 64, 0, 0, false}, Case{64, 64, 0, 16, false}, Case{8, 64, 5, 0, false},
                 Case{8, 64, 5, 6, false}, Case{8, 64, 56, 100, false}, Case{8, 64, 56, 16, true},
                 Case{1, 64, 63, 63, true}, Case{1, 64, 63, 1, true}}) {
    SCOPED_TRACE(::testing::Message() << "T " << c.T << " S " << c.S << " offset " << c.offset
                                      << " window " << c.window);
    const AttentionParams p{
        .scale = 0.125, .causal = true, .causal_offset = c.offset, .window = c.window};
    const SdpaGraphKey key = sdpa_graph_key(bf16({1, 2, c.T, 64}), bf16({1, 2, c.S, 64}),
                                            bf16({1, 2, c.S, 64}), p, false);
    ASSERT_EQ(cudnn_sdpa_unsupported(key), "");
    const CudnnBand band = cudnn_sdpa_band(key);
    EXPECT_EQ(band.bottom_right, c.bottom_right);
    EXPECT_GE(band.right, 0);
    EXPECT_EQ(band.left > 0, c.window > 0);
    for (int64_t i = 0; i < c.T; ++i) {
      for (int64_t j = 0; j < c.S; ++j) {
        const bool want = j <= i + c.offset && (c.window == 0 || j > i + c.offset - c.window);
        ASSERT_EQ(band_keeps(band, c.T, c.S, i, j), want) << "query " << i << " key " << j;
      }
    }
  }
}

TEST(SdpaGraphKey, TheSupportCheckNamesWhatCudnnCannotRun) {
  const AttentionParams p{.scale = 0.125, .causal = true};
  const Tensor k = bf16({1, 2, 16, 64}), v = bf16({1, 2, 16, 64});
  EXPECT_EQ(cudnn_sdpa_unsupported(sdpa_graph_key(bf16({1, 4, 16, 64}), k, v, p, false)), "");
  const std::string f32 = cudnn_sdpa_unsupported(
      sdpa_graph_key(Tensor::zeros({1, 4, 16, 64}), k.to(DType::f32), v.to(DType::f32), p, false));
  EXPECT_NE(f32.find("dtype f32"), std::string::npos) << f32;
  const std::string odd = cudnn_sdpa_unsupported(
      sdpa_graph_key(bf16({1, 4, 16, 12}), bf16({1, 2, 16, 12}), bf16({1, 2, 16, 12}), p, false));
  EXPECT_NE(odd.find("D = 12"), std::string::npos) << odd;
  const std::string wide = cudnn_sdpa_unsupported(
      sdpa_graph_key(bf16({1, 4, 16, 64}), k, bf16({1, 2, 16, 264}), p, false));
  EXPECT_NE(wide.find("Dv = 264"), std::string::npos) << wide;
  const Tensor strided = ops::transpose(bf16({1, 4, 64, 16}), 2, 3);  // (1, 4, 16, 64), D strided
  const std::string s = cudnn_sdpa_unsupported(sdpa_graph_key(strided, k, v, p, false));
  EXPECT_NE(s.find("not contiguous"), std::string::npos) << s;
  // Sliding windows the band cannot state.
  AttentionParams w = p;
  w.window = 4;
  const std::string more = cudnn_sdpa_unsupported(
      sdpa_graph_key(bf16({1, 4, 32, 64}), k, v, w, false));  // T = 32 > S = 16
  EXPECT_NE(more.find("T = 32, S = 16"), std::string::npos) << more;
  w.causal_offset = 6;  // window <= offset, and offset != S - T = 8
  const std::string off =
      cudnn_sdpa_unsupported(sdpa_graph_key(bf16({1, 4, 8, 64}), k, v, w, false));
  EXPECT_NE(off.find("window of 4 keys with causal_offset 6"), std::string::npos) << off;
  w.causal_offset = 8;
  EXPECT_EQ(cudnn_sdpa_unsupported(sdpa_graph_key(bf16({1, 4, 8, 64}), k, v, w, false)), "");
  w.dropout = AttentionDropout{.words = {.seed = 1, .count = 1 << 20}, .p = 0.1};
  const std::string drop =
      cudnn_sdpa_unsupported(sdpa_graph_key(bf16({1, 4, 8, 64}), k, v, w, false));
  EXPECT_NE(drop.find("dropout with a sliding window"), std::string::npos) << drop;
  w.window = 9;  // past the offset: top-left, which takes dropout
  EXPECT_EQ(cudnn_sdpa_unsupported(sdpa_graph_key(bf16({1, 4, 8, 64}), k, v, w, false)), "");
}

TEST(SdpaGraphKey, DropoutGetsAPhiloxKeyOfItsOwnPerReservation) {
  const rng::Reservation r{.seed = 7, .subsequence = 2, .offset = 1024, .count = 4096};
  const CudnnDropoutSeed s = cudnn_dropout_seed(r);
  EXPECT_EQ(s.offset, 0);
  EXPECT_GE(s.seed, 0);
  EXPECT_EQ(cudnn_dropout_seed(r).seed, s.seed);  // a replay: the same mask
  rng::Reservation seed = r, subsequence = r, next = r;
  seed.seed = 8;
  subsequence.subsequence = 3;
  next.offset = 1024 + 4096;  // the stream's next draw
  std::set<int64_t> seeds{s.seed};
  for (const rng::Reservation& other : {seed, subsequence, next})
    EXPECT_TRUE(seeds.insert(cudnn_dropout_seed(other).seed).second);
}

}  // namespace
}  // namespace reprise::cuda
