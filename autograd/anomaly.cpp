#include "autograd/anomaly.h"

#include <atomic>
#include <cmath>
#include <cstddef>

#include "base/error.h"

namespace reprise::autograd {
namespace {

std::atomic<bool> anomaly_mode{false};

std::string describe_all(const std::vector<TensorMeta>& metas) {
  std::string out;
  for (const TensorMeta& m : metas) out += (out.empty() ? "" : ", ") + m.describe();
  return out;
}

}  // namespace

const char* first_non_finite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype())) return nullptr;
  for (const double x : t.to_vector<double>()) {
    if (std::isnan(x)) return "NaN";
    if (std::isinf(x)) return "inf";
  }
  return nullptr;
}

bool detect_anomaly_enabled() { return anomaly_mode.load(std::memory_order_relaxed); }

void set_detect_anomaly(bool on) { anomaly_mode.store(on, std::memory_order_relaxed); }

DetectAnomaly::DetectAnomaly() : previous_(detect_anomaly_enabled()) { set_detect_anomaly(true); }

DetectAnomaly::~DetectAnomaly() { set_detect_anomaly(previous_); }

void check_forward_outputs(const Node& node, const Tensors& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (const char* bad = first_non_finite(outputs[i])) {
      REPRISE_FAIL("anomaly: ", node.where(), " produced ", bad, " in forward: output ", i, " ",
                   TensorMeta::of(outputs[i]).describe(), " from inputs ",
                   describe_all(node.inputs));
    }
  }
}

void check_backward_grads(const Node& node, const Tensors& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    if (const char* bad = first_non_finite(grads[i])) {
      REPRISE_FAIL("anomaly: the backward of ", node.where(), " produced ", bad,
                   " in the gradient of input ", i, " ", TensorMeta::of(grads[i]).describe(),
                   " (op inputs ", describe_all(node.inputs), ", outputs ",
                   describe_all(node.outputs), ")");
    }
  }
}

}  // namespace reprise::autograd
