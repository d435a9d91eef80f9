#include "fsdp.h"

#include <cstdio>

#include "engine/memory_stats.h"
#include "nn/llama.h"
#include "nn/trainer.h"
#include "parallel/process_group.h"
#include "report.h"

namespace study {

namespace {

double mib(int64_t bytes) { return double(bytes) / (1 << 20); }

// "1.08 MiB"
std::string mib_cell(int64_t bytes) { return printf_string("%.2f MiB", mib(bytes)); }

// `config` trained on `world` under `shard`: its row, from rank 0's view.
FsdpRow train(const nn::TrainConfig& config, const std::shared_ptr<const nn::TextDataset>& data,
              parallel::World& world, parallel::ShardMode shard, const std::string& label) {
  nn::Trainer trainer(config, data,
                      std::make_shared<parallel::ProcessGroup>(
                          world.communicator(), parallel::ProcessGroupOptions{.shard = shard}));
  FsdpRow row;
  row.policy = label;
  while (!trainer.finished()) {
    const nn::Trainer::StepStats s = trainer.step();
    row.losses.push_back(s.loss);
    row.gathered = s.gathered_bytes;
    row.waited_ms = 1e3 * s.gather_seconds;
  }
  const MemorySnapshot memory = memory_stats::snapshot();
  row.peak_parameter = memory[MemoryKind::parameter].peak;
  row.peak_saved = memory[MemoryKind::saved_activation].peak;
  row.peak_total = memory.total.peak;
  return row;
}

}  // namespace

FsdpStudy fsdp_study(const nn::TrainConfig& config,
                     const std::shared_ptr<const nn::TextDataset>& data, parallel::World& world,
                     const std::vector<std::string>& policies) {
  FsdpStudy study;
  study.rows.push_back(train(config, data, world, parallel::ShardMode::none, "replicated"));
  for (const std::string& policy : policies) {
    nn::TrainConfig c = config;
    c.checkpointing.set_policy(policy);
    study.rows.push_back(train(c, data, world, parallel::ShardMode::parameters, policy));
    study.rows.back().regathered = study.rows.back().gathered - study.rows[1].gathered;
  }
  const nn::LlamaForCausalLM model(config.model, nullptr);
  for (const nn::NamedParameter& p : model.parameters())
    study.layer_bytes += p.name.starts_with("model.layers.") ? p.value.nbytes() : 0;
  return study;
}

std::string fsdp_markdown(const std::vector<FsdpRow>& rows, int ranks, int64_t layer_bytes) {
  std::string out =
      "| weights | checkpoint policy | gathered per step | re-gathered by replay | waited for "
      "gathers | whole weights, peak | saved activations, peak | all together, peak | losses |\n"
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
  for (const FsdpRow& r : rows) {
    const bool reference = r.policy == "replicated";
    const std::string split_cells = reference ? "| none | | | "
                                              : "| " + r.policy + " | " + mib_cell(r.gathered) +
                                                    " | " + mib_cell(r.regathered) + " | " +
                                                    printf_string("%.1f ms", r.waited_ms) + " ";
    out += std::string("| ") + (reference ? "replicated " : "split ") + split_cells + "| " +
           mib_cell(r.peak_parameter) + " | " + mib_cell(r.peak_saved) + " | " +
           mib_cell(r.peak_total) + " | " +
           (reference                         ? "reference"
            : r.losses == rows.front().losses ? "bitwise equal"
                                              : "DIFFER") +
           " |\n";
  }
  char note[512];
  std::snprintf(
      note, sizeof note,
      "\n%d processes, %.2f MiB of decoder-layer weights. A runtime that freed a checkpointed "
      "layer's weights between its replay and its backward would gather them a third time per "
      "step (%.2f MiB more with every layer checkpointed) and lower no peak: the backward runs "
      "right after the replay and needs them too. reprise keeps them.\n",
      ranks, mib(layer_bytes), mib(layer_bytes) * (ranks - 1) / ranks);
  out += note;
  return out;
}

}  // namespace study
