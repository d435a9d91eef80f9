// Cases of fused attention (sdpa, and sdpa_dropout with a fixed
// reservation, so that the op is a deterministic function of q, k and v).
#include "ops/views.h"
#include "tests/cases/sdpa_cases.h"

namespace reprise::testing {
namespace {

const RegisterOpCases attention_cases({
    sdpa_case("gqa_7x7_d5", kSmall, {}),
    sdpa_case("gqa_7x7_d5_causal", kSmall, {.causal = true}, sdpa_perf("8x8x256x32_gqa4_causal")),
    sdpa_case("t1", {2, 4, 2, 1, 7, 5, 5}, {}),
    sdpa_case("t1_causal", {2, 4, 2, 1, 7, 5, 5}, {.causal = true}),
    sdpa_case("causal_t_lt_s", {1, 2, 1, 5, 9, 4, 3}, {.causal = true}),
    sdpa_case("causal_t_gt_s", {1, 2, 2, 9, 5, 4, 6}, {.causal = true}),
    sdpa_case("dv_ne_d_scale", {2, 2, 1, 6, 8, 5, 3}, {.scale = 0.7}),
    // Lengths past one 64 x 64 tile, with ragged tails.
    sdpa_case("blocks_70x70", {1, 2, 1, 70, 70, 3, 3}, {}),
    sdpa_case("blocks_70x70_causal", {1, 2, 1, 70, 70, 3, 3}, {.causal = true}),
    sdpa_case("blocks_67x130_causal", {1, 1, 1, 67, 130, 2, 2}, {.causal = true}),
    // Causal masks aligned bottom-right (offset S - T: the queries are the
    // last positions, as with a KV cache) and in between.
    sdpa_case("causal_offset_t1", {2, 4, 2, 1, 7, 5, 5}, {.causal = true, .causal_offset = 6}),
    sdpa_case("causal_offset_t_lt_s", {1, 2, 1, 5, 9, 4, 3}, {.causal = true, .causal_offset = 4}),
    sdpa_case("causal_offset_2", {1, 2, 2, 9, 5, 4, 6}, {.causal = true, .causal_offset = 2}),
    sdpa_case("blocks_67x130_causal_offset", {1, 1, 1, 67, 130, 2, 2},
              {.causal = true, .causal_offset = 63}),
    // Dropout with a fixed reservation: a deterministic function of q, k, v.
    sdpa_case("dropout_gqa_7x7", kSmall, dropout_options(0.3, kSmall, false)),
    sdpa_case("dropout_gqa_7x7_causal", kSmall, dropout_options(0.3, kSmall, true)),
    // The reservation covers the model's sizes too, so the case runs on both.
    sdpa_case("dropout_gqa_7x7_causal_p0.1", kSmall, dropout_options(0.1, kModel, true),
              sdpa_perf("8x8x256x32_gqa4_causal_p0.1")),
    sdpa_case("dropout_blocks_70x70_causal", {1, 2, 1, 70, 70, 3, 3},
              dropout_options(0.5, {1, 2, 1, 70, 70, 3, 3}, true)),
    sdpa_case("dropout_causal_offset", {1, 2, 1, 5, 9, 4, 3},
              dropout_options(0.3, {1, 2, 1, 5, 9, 4, 3}, true, 4)),
    // Sliding windows: one key, a few, smaller than a tile and larger than
    // one (tiles before the window skipped), with the KV cache's offset S - T
    // and more queries than keys.
    sdpa_case("window_1", kSmall, window_options(1)),
    sdpa_case("window_3", kSmall, window_options(3)),
    sdpa_case("window_20_blocks_70x70", {1, 2, 1, 70, 70, 3, 3}, window_options(20)),
    sdpa_case("window_70_blocks_150x150", {1, 1, 1, 150, 150, 2, 2}, window_options(70)),
    sdpa_case("window_66_kv_cache", {1, 2, 1, 5, 140, 4, 3}, window_options(66, 135)),
    sdpa_case("window_7_t_gt_s", {1, 2, 2, 9, 5, 4, 6}, window_options(7)),
    sdpa_case("dropout_window_20_blocks_70x70", {1, 2, 1, 70, 70, 3, 3},
              dropout_options(0.5, {1, 2, 1, 70, 70, 3, 3}, true, 0, 20)),
    // Attention sinks (GPT-OSS): a logit per head in each row's denominator.
    sdpa_sinks_case("sinks_gqa_7x7", kSmall, {}),
    sdpa_sinks_case("sinks_gqa_7x7_causal", kSmall, {.causal = true}),
    sdpa_sinks_case("sinks_window_20_blocks_70x70", {1, 2, 1, 70, 70, 3, 3}, window_options(20)),
    sdpa_sinks_case("sinks_dropout_gqa_7x7_causal", kSmall, dropout_options(0.3, kSmall, true)),
    // Strided inputs: q and v read through transposed views (B, T, H, D).
    {"sdpa/strided_views",
     [] {
       return Inputs{param({2, 7, 4, 5}, 54), param({2, 2, 9, 5}, 55), param({2, 9, 2, 3}, 56)};
     },
     [](const Inputs& in) {
       return ops::scaled_dot_product_attention(ops::transpose(in[0], 1, 2), in[1],
                                                ops::transpose(in[2], 1, 2), {.causal = true});
     }},
});

}  // namespace
}  // namespace reprise::testing
