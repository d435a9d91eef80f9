#include "loss_curves.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "engine/error.h"

namespace study {

std::vector<Curve> train_curves(const nn::TrainConfig& base,
                                const std::vector<CurveVariant>& variants,
                                const std::shared_ptr<const nn::TextDataset>& data,
                                int64_t eval_batches) {
  std::vector<Curve> out;
  for (const CurveVariant& v : variants) {
    nn::TrainConfig c = base;
    c.checkpoint_policy = v.checkpoint_policy;
    c.rng_replay = v.rng;
    nn::Trainer trainer(c, data);
    Curve curve{v, {}, 0, 0};
    while (!trainer.finished()) {
      const double t0 = process_cpu_seconds();
      curve.losses.push_back(trainer.step().loss);
      curve.seconds += process_cpu_seconds() - t0;
    }
    curve.val_loss = trainer.evaluate(eval_batches);
    out.push_back(std::move(curve));
  }
  return out;
}

double tail_mean(const Curve& c, size_t n) {
  REPRISE_CHECK(!c.losses.empty(), "study::tail_mean: curve '", c.variant.label, "' is empty");
  n = std::min(n, c.losses.size());
  double sum = 0;
  for (size_t i = c.losses.size() - n; i < c.losses.size(); ++i) sum += c.losses[i];
  return sum / double(n);
}

void write_curves_csv(const std::string& path, const std::vector<Curve>& curves) {
  std::ofstream f(path, std::ios::trunc);
  REPRISE_CHECK(f.good(), "study: cannot open '", path, "' for writing");
  f << "step";
  for (const Curve& c : curves) f << "," << c.variant.label;
  f << "\n";
  const size_t steps = curves.empty() ? 0 : curves.front().losses.size();
  for (size_t i = 0; i < steps; ++i) {
    f << i + 1;
    for (const Curve& c : curves) {
      char buf[32];
      std::snprintf(buf, sizeof buf, ",%.9g", double(c.losses.at(i)));
      f << buf;
    }
    f << "\n";
  }
  f.close();
  REPRISE_CHECK(!f.fail(), "study: writing '", path, "' failed");
}

}  // namespace study
