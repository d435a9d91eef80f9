#pragma once
// The training-curve part of the study: the same run (model, data, seed,
// schedule) trained several times, differing only in how layers are
// checkpointed and how recompute gets its random numbers.

#include <memory>
#include <string>
#include <vector>

#include "autograd/checkpoint.h"
#include "nn/data.h"
#include "nn/trainer.h"
#include "step_measure.h"

namespace study {

using namespace reprise;

struct CurveVariant {
  std::string label;  // column name in the CSV ("full/fresh")
  std::string checkpoint_policy;
  autograd::RngReplay rng = autograd::RngReplay::recorded;
};

struct Curve {
  CurveVariant variant;
  std::vector<float> losses;  // training loss of steps 1..steps
  double val_loss = 0;        // held-out loss after the last step
  double seconds = 0;         // of all steps, by step_clock_seconds
};

// Trains `base` once per variant with nn::Trainer on `device`, from
// scratch each time: the run's initialisation, or `weights` when given.
std::vector<Curve> train_curves(const nn::TrainConfig& base,
                                const std::vector<CurveVariant>& variants,
                                const std::shared_ptr<const nn::TextDataset>& data,
                                int64_t eval_batches, Device device,
                                const NamedTensors* weights = nullptr);

// A Markdown table, one row per curve: the loss of step 1, the mean
// training loss over each quarter of the run, the held-out loss and its
// gap to the first curve, and the CPU time.
std::string curves_markdown(const std::vector<Curve>& curves);

// The losses as CSV: "step,<label>,<label>,..." then one line per step.
std::string curves_csv(const std::vector<Curve>& curves);

}  // namespace study
