#include "step_measure.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <ctime>

#include "autograd/backward.h"
#include "base/error.h"
#include "engine/grad_mode.h"
#include "engine/memory_stats.h"
#include "nn/autocast.h"
#include "nn/device.h"

namespace study {

double process_cpu_seconds() {
  timespec t{};
  REPRISE_CHECK(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) == 0,
                "process_cpu_seconds: clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed");
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

double step_clock_seconds(Device device) {
  if (device.is_cpu()) return process_cpu_seconds();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void copy_state(nn::Module& model, const NamedTensors& weights) {
  NoGradGuard no_grad;
  for (auto& [name, value] : model.named_state()) {
    const auto it = std::find_if(weights.begin(), weights.end(),
                                 [&](const auto& w) { return w.first == name; });
    REPRISE_CHECK(it != weights.end(), "study::copy_state: no weights for '", name, "'");
    value.copy_(it->second);
  }
}

GradientError compare(const StepMeasurement& step, const StepMeasurement& reference) {
  REPRISE_CHECK(step.grads.size() == reference.grads.size(), "study::compare: ", step.grads.size(),
                " gradients against ", reference.grads.size());
  GradientError e;
  double diff2 = 0, ref2 = 0;
  for (size_t p = 0; p < step.grads.size(); ++p) {
    const std::vector<float>& g = step.grads[p];
    const std::vector<float>& r = reference.grads[p];
    REPRISE_CHECK(g.size() == r.size(), "study::compare: parameter ", p, " has ", g.size(),
                  " gradient elements against ", r.size());
    for (size_t i = 0; i < g.size(); ++i) {
      // Bitwise: the same float bits, so -0 vs +0 counts as a difference.
      if (std::bit_cast<uint32_t>(g[i]) != std::bit_cast<uint32_t>(r[i])) e.bitwise_equal = false;
      const double d = double(g[i]) - double(r[i]);
      e.max_abs = std::max(e.max_abs, std::abs(d));
      diff2 += d * d;
      ref2 += double(r[i]) * double(r[i]);
    }
  }
  e.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  return e;
}

StepBench::StepBench(const nn::LlamaConfig& config, const nn::TextDataset& data, int64_t batch,
                     int64_t seq, uint64_t seed, Device device, DType dtype,
                     const NamedTensors* weights)
    : device_(device),
      dtype_(dtype),
      gen_(std::make_shared<rng::Generator>(seed)),
      model_(config, *gen_) {
  if (weights != nullptr) copy_state(model_, *weights);
  model_.set_dropout_generator(gen_);
  batch_ = data.sample(batch, seq, *gen_);
  start_ = gen_->state();
  nn::to_device(model_, device);
  batch_.input_ids = batch_.input_ids.to(device);
  batch_.labels = batch_.labels.to(device);
}

StepMeasurement StepBench::step(nn::LayerCheckpointing& layers, bool read_grads) {
  gen_->set_state(start_);
  model_.zero_grad();
  autograd::take_mismatches();
  const autograd::RecomputeStats before = autograd::recompute_stats();
  memory_stats::reset_peaks();
  const double t0 = step_clock_seconds(device_);
  StepMeasurement m;
  nn::CausalLMOutput routing;  // the forward's router terms, read after the step
  {
    Tensor loss;
    {
      const nn::Autocast precision(dtype_);
      const nn::CausalLMOutput out = model_.forward(batch_.input_ids, layers.runner());
      loss = model_.causal_lm_loss(out, batch_.labels);  // with MoE router losses
      routing.moe = out.moe;
    }
    autograd::backward(loss);
    m.loss = loss.item<float>();  // waits for the device
  }
  m.seconds = step_clock_seconds(device_) - t0;
  if (read_grads) m.moe = routing.moe_stats();
  const MemorySnapshot snap = memory_stats::snapshot();
  m.peak_saved_activation = snap[MemoryKind::saved_activation].peak;
  m.peak_total = snap.total.peak;
  m.stats = autograd::recompute_stats() - before;
  m.mismatches = autograd::take_mismatches();
  if (read_grads) {
    for (const nn::NamedParameter& p : model_.parameters()) {
      m.grads.push_back(p.value.grad().to_vector<float>());
    }
  }
  return m;
}

StepMeasurement StepBench::run(const nn::CheckpointConfig& checkpointing, int warmup, int repeats) {
  REPRISE_CHECK(repeats >= 1 && warmup >= 0, "StepBench::run: expected warmup >= 0 and ",
                "repeats >= 1, got ", warmup, " and ", repeats);
  nn::LayerCheckpointing layers(checkpointing, gen_, nn::moe_scopes_of(model_.config()));
  for (int i = 0; i < warmup; ++i) step(layers, false);
  StepMeasurement first = step(layers, true);
  std::vector<double> times{first.seconds};
  for (int i = 1; i < repeats; ++i) times.push_back(step(layers, false).seconds);
  first.seconds = *std::min_element(times.begin(), times.end());
  return first;
}

}  // namespace study
