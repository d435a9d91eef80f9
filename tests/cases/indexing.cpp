// Cases of index_select, gather, scatter_add, index_add, where, topk and sort:
// repeated indices, i32 indices, transposed operands.
#include "ops/indexing.h"

#include "ops/views.h"
#include "tests/cases/inputs.h"
#include "tests/cases/op_case.h"

namespace reprise::testing {
namespace {

using namespace perf_sizes;

const RegisterOpCases indexing_cases({
    {"index_select/dim1_repeats",
     [] {
       return Inputs{param({5, 7, 3}, 61), i64({6, 0, 6, 2, 6})};
     },
     [](const Inputs& in) { return ops::index_select(in[0], 1, in[1]); }},
    // A transposed x and an i32 index.
    {"index_select/dim0_view_i32",
     [] {
       return Inputs{param({4, 7}, 62), i64({3, 3, 0, 6}).to(DType::i32)};
     },
     [](const Inputs& in) { return ops::index_select(ops::transpose(in[0], 0, 1), 0, in[1]); }},
    {"index_select/last_dim",
     [] {
       return Inputs{param({3, 5, 7}, 63), i64({1, 1, 6})};
     },
     [](const Inputs& in) { return ops::index_select(in[0], -1, in[1]); }},
    {"index_select/dim0_rows",
     [] {
       return Inputs{param({5, 3}, 84), i64({4, 0, 4, 2, 1, 3})};
     },
     [](const Inputs& in) { return ops::index_select(in[0], 0, in[1]); },
     {},
     PerfInputs{"2048x256_rows",
                [] {
                  return Inputs{perf_input({N, C}, 21), indices({N}, N, 22)};
                }}},
    {"gather/dim1_3x5x7",
     [] {
       return Inputs{param({3, 5, 7}, 64), indices({3, 4, 7}, 5, 1)};
     },
     [](const Inputs& in) { return ops::gather(in[0], 1, in[1]); },
     {},
     PerfInputs{"2048x256_8_per_row",
                [] {
                  return Inputs{perf_input({N, C}, 23), indices({N, 8}, C, 24)};
                }}},
    // index smaller than x off dim.
    {"gather/dim2_smaller_index",
     [] {
       return Inputs{param({3, 5, 7}, 65), indices({2, 5, 4}, 7, 2)};
     },
     [](const Inputs& in) { return ops::gather(in[0], 2, in[1]); }},
    // A transposed (non-contiguous) index, longer than x along dim.
    {"gather/dim0_transposed_index",
     [] {
       return Inputs{param({4, 7}, 66), indices({7, 9}, 4, 3)};
     },
     [](const Inputs& in) { return ops::gather(in[0], 0, in[1].transpose(0, 1)); }},
    {"scatter_add/dim2",
     [] {
       return Inputs{param({3, 5, 7}, 67), indices({3, 5, 4}, 7, 4), param({3, 5, 4}, 68)};
     },
     [](const Inputs& in) { return ops::scatter_add(in[0], 2, in[1], in[2]); }},
    {"scatter_add/dim1_rows",
     [] {
       return Inputs{param({4, 6}, 85), indices({4, 3}, 6, 6), param({4, 3}, 86)};
     },
     [](const Inputs& in) { return ops::scatter_add(in[0], 1, in[1], in[2]); },
     {},
     PerfInputs{
         "2048x256_8_per_row",
         [] {
           return Inputs{perf_input({N, C}, 25), indices({N, 8}, C, 26), perf_input({N, 8}, 27)};
         }}},
    {"scatter_add/dim0_smaller",
     [] {
       return Inputs{param({4, 6}, 69), indices({9, 3}, 4, 5), param({9, 3}, 70)};
     },
     [](const Inputs& in) { return ops::scatter_add(in[0], 0, in[1], in[2]); }},
    {"index_add/dim0",
     [] {
       return Inputs{param({5, 3, 7}, 71), i64({4, 1, 4}), param({3, 3, 7}, 72)};
     },
     [](const Inputs& in) { return ops::index_add(in[0], 0, in[1], in[2]); },
     {},
     PerfInputs{"2048x256_top2_combine",
                [] {
                  return Inputs{perf_input({N, C}, 28), indices({N * K}, N, 29),
                                perf_input({N * K, C}, 30)};
                }}},
    {"index_add/dim2_transposed_src",
     [] {
       return Inputs{param({3, 5, 7}, 73), i64({6, 6, 0, 2}), param({3, 4, 5}, 74)};
     },
     [](const Inputs& in) { return ops::index_add(in[0], 2, in[1], ops::transpose(in[2], 1, 2)); }},
    {"where/broadcast_3x1x7_3x5x7_5x1",
     [] {
       return Inputs{mask({3, 1, 7}, 75), param({3, 5, 7}, 76), param({5, 1}, 77)};
     },
     [](const Inputs& in) { return ops::where(in[0], in[1], in[2]); },
     {},
     PerfInputs{"2048x256",
                [] {
                  return Inputs{mask({N, C}, 33), perf_input({N, C}, 31), perf_input({N, C}, 32)};
                }}},
    {"where/scalar_b",
     [] {
       return Inputs{mask({3, 5}, 78), param({3, 5}, 79), param({}, 80)};
     },
     [](const Inputs& in) { return ops::where(in[0], in[1], in[2]); }},
    {"topk/last_k2",
     [] {
       return Inputs{param({3, 5, 8}, 87)};
     },
     [](const Inputs& in) {
       ops::TopKResult r = ops::topk(in[0], 2);
       return Outputs(std::vector<Tensor>{r.values, r.indices});
     },
     {},
     PerfInputs{"2048x8_top2",
                [] {
                  return Inputs{perf_input({N, E}, 34)};
                }}},
    {"topk/dim1_k3",
     [] {
       return Inputs{param({3, 5, 7}, 81)};
     },
     [](const Inputs& in) { return ops::topk(in[0], 3, 1).values; }},
    {"topk/last_smallest_unsorted",
     [] {
       return Inputs{param({3, 5, 7}, 82)};
     },
     [](const Inputs& in) { return ops::topk(in[0], 4, -1, false, false).values; }},
    {"topk/k_all_257", [] { return Inputs{param({257}, 83)}; },
     [](const Inputs& in) { return ops::topk(in[0], 257, 0).values; }},
    // Lines of 300: merge passes with a short last run.
    {"sort/last_300",
     [] {
       return Inputs{param({3, 300}, 84)};
     },
     [](const Inputs& in) {
       ops::TopKResult r = ops::sort(in[0]);
       return Outputs(std::vector<Tensor>{r.values, r.indices});
     },
     {},
     PerfInputs{"2048x256_rows",
                [] {
                  return Inputs{perf_input({N, V}, 35)};
                }}},
    {"sort/dim1_descending",
     [] {
       return Inputs{param({3, 5, 7}, 85)};
     },
     [](const Inputs& in) { return ops::sort(in[0], 1, /*descending=*/true).values; }},
});

}  // namespace
}  // namespace reprise::testing
