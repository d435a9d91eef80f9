#pragma once
// The shape of one recorded checkpoint region as a cost model: which values
// its nodes produce, which of them backward reads, which values each node
// reads and what each node costs. The budget planner searches over it.

#include <cstdint>
#include <string>
#include <vector>

namespace reprise::autograd {

// What replaying a node costs, in flop-equivalents: its flops plus
// flops_per_byte for each byte it moves (OpInfo's bytes: every input and
// output once unless the op says otherwise). flops_per_byte is the machine's
// balance, its flop rate over its memory bandwidth: at 0 only flops count and
// an elementwise op looks free to replay; a 2-core AVX-512 CPU runs the
// Llama example's GEMMs at about 200 GFLOP/s and its elementwise ops at
// about 20 GB/s (10); a GPU is nearer 100-300.
struct ReplayCostModel {
  double flops_per_byte = 0;
};

// One recorded region, as the planner sees it.
struct RegionGraph {
  struct Value {
    int32_t node;     // producing node (index in `nodes`)
    uint32_t output;  // output of that node
    int64_t bytes;
    bool read_by_backward;  // some saved slot holds it
  };
  struct NodeInfo {
    std::string op;
    double flops;
    std::vector<int32_t> reads;  // values (indices in `values`) the node reads
    double bytes_moved = 0;      // memory traffic of one run
  };
  std::string region;
  std::vector<NodeInfo> nodes;
  std::vector<Value> values;
  int64_t input_bytes = 0;  // non-parameter region inputs: held whatever the plan
  ReplayCostModel model;    // how evaluate() prices a replayed node

  struct Cost {
    int64_t bytes;  // input_bytes + kept values that are read
    double flops;   // replay flops
    double cost;    // replay cost by `model`: what the planner minimizes
  };
  // The memory and replay cost of keeping exactly the values marked in `keep`,
  // computed as the replay in autograd/checkpoint.cpp would run it.
  Cost evaluate(const std::vector<bool>& keep) const;
};

}  // namespace reprise::autograd
