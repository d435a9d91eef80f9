#include "loss_curves.h"

#include <algorithm>
#include <cstdio>

#include "base/error.h"

namespace study {

std::vector<Curve> train_curves(const nn::TrainConfig& base,
                                const std::vector<CurveVariant>& variants,
                                const std::shared_ptr<const nn::TextDataset>& data,
                                int64_t eval_batches, Device device, const NamedTensors* weights) {
  std::vector<Curve> out;
  for (const CurveVariant& v : variants) {
    nn::TrainConfig c = base;
    c.checkpointing.set_policy(v.checkpoint_policy);
    c.checkpointing.rng_replay = v.rng;
    nn::Trainer trainer(c, data, nullptr, device);
    if (weights != nullptr) copy_state(trainer.model(), *weights);
    Curve curve{v, {}, 0, 0};
    while (!trainer.finished()) {
      const double t0 = step_clock_seconds(device);
      curve.losses.push_back(trainer.step().loss);  // the loss read waits for the device
      curve.seconds += step_clock_seconds(device) - t0;
    }
    curve.val_loss = trainer.evaluate(eval_batches);
    out.push_back(std::move(curve));
  }
  return out;
}

namespace {

// Mean training loss of steps [begin, end) (0-based).
double window_mean(const Curve& c, size_t begin, size_t end) {
  REPRISE_CHECK(begin < end && end <= c.losses.size(), "study::window_mean: steps [", begin, ", ",
                end, ") of curve '", c.variant.label, "' with ", c.losses.size(), " steps");
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += c.losses[i];
  return sum / double(end - begin);
}

}  // namespace

std::string curves_markdown(const std::vector<Curve>& curves) {
  REPRISE_CHECK(!curves.empty() && curves.front().losses.size() >= 4,
                "study::curves_markdown: expected curves of at least 4 steps");
  const size_t steps = curves.front().losses.size();
  std::vector<size_t> bounds;  // quarter boundaries: 0, n/4, n/2, 3n/4, n
  for (size_t q = 0; q <= 4; ++q) bounds.push_back(steps * q / 4);
  std::string out = "| run | loss step 1 |";
  for (size_t q = 0; q < 4; ++q) {
    out +=
        " mean loss " + std::to_string(bounds[q] + 1) + "-" + std::to_string(bounds[q + 1]) + " |";
  }
  out += " held-out loss | vs first | CPU s |\n|";
  for (size_t i = 0; i < 9; ++i) out += " --- |";
  out += "\n";
  for (const Curve& c : curves) {
    REPRISE_CHECK(c.losses.size() == steps, "study::curves_markdown: curve '", c.variant.label,
                  "' has ", c.losses.size(), " steps, the first ", steps);
    char buf[64];
    out += "| " + c.variant.label;
    std::snprintf(buf, sizeof buf, " | %.4f |", double(c.losses.front()));
    out += buf;
    for (size_t q = 0; q < 4; ++q) {
      std::snprintf(buf, sizeof buf, " %.4f |", window_mean(c, bounds[q], bounds[q + 1]));
      out += buf;
    }
    std::snprintf(buf, sizeof buf, " %.4f | %+.4f | %.1f |\n", c.val_loss,
                  c.val_loss - curves.front().val_loss, c.seconds);
    out += buf;
  }
  return out;
}

std::string curves_csv(const std::vector<Curve>& curves) {
  std::string out = "step";
  for (const Curve& c : curves) out += "," + c.variant.label;
  out += "\n";
  const size_t steps = curves.empty() ? 0 : curves.front().losses.size();
  for (size_t i = 0; i < steps; ++i) {
    out += std::to_string(i + 1);
    for (const Curve& c : curves) {
      char buf[32];
      std::snprintf(buf, sizeof buf, ",%.9g", double(c.losses.at(i)));
      out += buf;
    }
    out += "\n";
  }
  return out;
}

}  // namespace study
