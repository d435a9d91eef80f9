#pragma once
// einsum, as torch.einsum: a sum of products named by subscripts,
// "bhqd,bhkd->bhqk". Lowered to the recorded ops (sum, permute, reshape,
// expand, matmul), so it needs no kernel and no gradient of its own, and
// its products are the backend's matmul (each element one FMA chain on the
// CPU).

#include <string>
#include <vector>

#include "engine/tensor.h"

namespace reprise::ops {

// equation: one subscript per operand, comma-separated, each a letter per
// dim (a-z, A-Z) with at most one "..." for dims broadcast as numpy's;
// then optionally "->" and the output's subscripts. Without "->" the
// output is "..." then the letters that appear once, in alphabetical
// order. A letter in no output is summed over. Dims of size 1 broadcast
// against the letter's size elsewhere. Operands: one floating dtype.
// Operands contract left to right. A letter repeated within one operand (a
// diagonal, "ii->i") raises.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace reprise::ops
