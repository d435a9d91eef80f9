#include "tests/support/golden.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "base/error.h"
#include "io/safetensors.h"

namespace reprise::testing {

namespace {
constexpr const char* kGoldenFormat = "reprise-golden-v1";

// "[1, 0, 4]": the multi-index of flat row-major position `flat`.
std::string index_of(const Shape& shape, int64_t flat) {
  Shape index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return to_string(index);
}
}  // namespace

std::string fixture_path(const std::string& name) {
  return std::string(REPRISE_FIXTURES_DIR) + "/" + name;
}

std::map<std::string, Tensor> load_golden(const std::string& file) {
  const std::string path = fixture_path(file);
  io::SafetensorsFile golden = io::read_safetensors(path);
  auto format = golden.metadata().find("format");
  REPRISE_CHECK(format != golden.metadata().end() && format->second == kGoldenFormat,
                "load_golden: ", path, " has metadata format \"",
                format == golden.metadata().end() ? "(none)" : format->second, "\", expected \"",
                kGoldenFormat, "\" (see tests/fixtures/README.md)");
  std::map<std::string, Tensor> out;
  for (const std::string& name : golden.names()) out.emplace(name, golden.get(name));
  return out;
}

const std::map<std::string, Tensor>& GoldenModel::tensors() const {
  static std::map<std::string, std::map<std::string, Tensor>> loaded;
  auto it = loaded.find(file);
  if (it == loaded.end()) it = loaded.emplace(file, load_golden(file)).first;
  return it->second;
}

const Tensor& golden_tensor(const std::map<std::string, Tensor>& golden, const std::string& name) {
  auto it = golden.find(name);
  REPRISE_CHECK(it != golden.end(), "golden file has no ", name);
  return it->second;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (float v : t.to_vector<float>()) m = std::max(m, double(std::abs(v)));
  return m;
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double atol,
                                     double rtol) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << "shape mismatch: actual " << actual.describe()
                                         << ", expected " << expected.describe();
  }
  std::vector<double> a = actual.to_vector<double>();
  std::vector<double> e = expected.to_vector<double>();
  int64_t failures = 0;
  int64_t worst = -1;
  double worst_excess = 0;  // |a - e| - allowed, or infinity for NaN/inf mismatches
  for (size_t i = 0; i < a.size(); ++i) {
    double excess;
    if (std::isnan(a[i]) || std::isnan(e[i])) {
      excess = std::isnan(a[i]) && std::isnan(e[i]) ? -1.0 : INFINITY;
    } else if (std::isinf(a[i]) || std::isinf(e[i])) {
      excess = a[i] == e[i] ? -1.0 : INFINITY;
    } else {
      excess = std::abs(a[i] - e[i]) - (atol + rtol * std::abs(e[i]));
    }
    if (excess > 0) {
      ++failures;
      if (worst < 0 || excess > worst_excess) {
        worst = int64_t(i);
        worst_excess = excess;
      }
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  std::ostringstream msg;
  msg.precision(9);
  double aw = a[size_t(worst)], ew = e[size_t(worst)];
  msg << failures << " of " << a.size() << " elements of " << actual.describe()
      << " differ beyond atol " << atol << " + rtol " << rtol << " * |expected|; worst at "
      << index_of(actual.shape(), worst) << ": actual " << aw << ", expected " << ew << ", |diff| "
      << std::abs(aw - ew) << ", allowed " << atol + rtol * std::abs(ew);
  return ::testing::AssertionFailure() << msg.str();
}

}  // namespace reprise::testing
