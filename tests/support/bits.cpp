#include "tests/support/bits.h"

#include <cstring>

namespace reprise::testing {

std::vector<uint32_t> f32_bits(const std::vector<float>& values) {
  std::vector<uint32_t> out(values.size());
  std::memcpy(out.data(), values.data(), values.size() * sizeof(float));
  return out;
}

std::vector<uint32_t> f32_bits(const Tensor& t) {
  return f32_bits(t.contiguous().to(DType::f32).to_vector<float>());
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.dtype() == cb.dtype() && ca.shape() == cb.shape() &&
         std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

}  // namespace reprise::testing
