#include "autograd/verifier.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace reprise::autograd {

const char* verify_name(Verify v) {
  switch (v) {
    case Verify::none:
      return "none";
    case Verify::metadata:
      return "metadata";
    case Verify::bitwise:
      return "bitwise";
  }
  return "unknown";
}

std::string Mismatch::describe() const {
  std::ostringstream s;
  s << "recompute mismatch in region '" << region << "': " << op << " at '" << scope << "', output "
    << output;
  if (differing < 0) {
    s << ": forward produced " << expected << ", replay produced " << actual;
  } else {
    s << " " << expected << ": " << differing << " element(s) differ, max " << max_ulp << " ulp";
  }
  return s.str();
}

uint64_t hash_values(const Tensor& t) {
  Tensor c = t.contiguous().to(Device::cpu());  // hashed on the host
  const auto* p = static_cast<const unsigned char*>(c.raw_data());
  size_t n = c.nbytes();
  // A multiply-rotate mix over 8-byte words; collisions only matter for a
  // verifier and are ~2^-64 per comparison.
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ (w * 0xBF58476D1CE4E5B9ull)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

namespace {
// Maps float bits to integers that are ordered like the floats.
template <class Bits>
int64_t ordered(Bits b) {
  using S = std::make_signed_t<Bits>;
  constexpr Bits sign = Bits(1) << (sizeof(Bits) * 8 - 1);
  return (b & sign) ? -int64_t(S(b & ~sign)) : int64_t(b);
}
}  // namespace

std::pair<int64_t, double> ulp_difference(const Tensor& a, const Tensor& b) {
  REPRISE_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype(), "ulp_difference: ", a.describe(),
                " vs ", b.describe());
  Tensor x = a.contiguous().to(Device::cpu()), y = b.contiguous().to(Device::cpu());
  int64_t differing = 0;
  double max_ulp = 0;
  auto scan = [&]<class Bits>() {
    const Bits* p = static_cast<const Bits*>(x.raw_data());
    const Bits* q = static_cast<const Bits*>(y.raw_data());
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (p[i] == q[i]) continue;
      ++differing;
      max_ulp = std::max(max_ulp, std::abs(double(ordered(p[i]) - ordered(q[i]))));
    }
  };
  switch (x.element_size()) {
    case 8:
      scan.operator()<uint64_t>();
      break;
    case 4:
      scan.operator()<uint32_t>();
      break;
    case 2:
      scan.operator()<uint16_t>();
      break;
    default:
      scan.operator()<uint8_t>();
      break;
  }
  return {differing, max_ulp};
}

Fingerprint Fingerprint::of(const Tensor& t, Verify mode) {
  NoGradGuard no_grad;  // t is a recorded output: reading its layout is plumbing
  Fingerprint f{t.shape(), t.dtype()};
  if (mode == Verify::bitwise) {
    f.hash = hash_values(t);
    f.reference = t.clone();
  }
  return f;
}

std::optional<Mismatch> Fingerprint::compare(const Tensor& r, Verify mode) const {
  Mismatch m;
  m.expected = std::string(dtype_name(dtype)) + to_string(shape);
  m.actual = std::string(dtype_name(r.dtype())) + to_string(r.shape());
  if (r.shape() != shape || r.dtype() != dtype) return m;
  if (mode != Verify::bitwise || hash_values(r) == hash) return std::nullopt;
  auto [differing, max_ulp] = ulp_difference(reference, r);
  if (differing == 0) return std::nullopt;  // a hash collision of equal values cannot happen
  m.differing = differing;
  m.max_ulp = max_ulp;
  return m;
}

namespace {
std::vector<Mismatch>& mismatch_log() {
  thread_local std::vector<Mismatch> log;
  return log;
}
}  // namespace

std::vector<Mismatch> take_mismatches() { return std::exchange(mismatch_log(), {}); }
void report_mismatch(Mismatch m) { mismatch_log().push_back(std::move(m)); }

}  // namespace reprise::autograd
