#pragma once
// The shape of one recorded checkpoint region as a cost model: which values
// its nodes produce, which of them backward reads, which values each node
// reads and what each node costs. The budget planner searches over it.

#include <cstdint>
#include <string>
#include <vector>

namespace reprise::autograd {

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
  };
  std::string region;
  std::vector<NodeInfo> nodes;
  std::vector<Value> values;
  int64_t input_bytes = 0;  // non-parameter region inputs: held whatever the plan

  struct Cost {
    int64_t bytes;  // input_bytes + kept values that are read
    double flops;   // replay flops
  };
  // The memory and replay cost of keeping exactly the values marked in `keep`,
  // computed as the replay in autograd/checkpoint.cpp would run it.
  Cost evaluate(const std::vector<bool>& keep) const;
};

}  // namespace reprise::autograd
