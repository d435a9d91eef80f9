#include "fsdp.h"

#include <cstdio>

#include "engine/memory_stats.h"
#include "nn/llama.h"
#include "nn/trainer.h"
#include "parallel/process_group.h"

namespace study {

namespace {

double mib(int64_t bytes) { return double(bytes) / (1 << 20); }

std::string format(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a);
  return buf;
}

std::string format(const char* fmt, int a, double b, double c) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

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
                                              : "| " + r.policy + " | " +
                                                    format("%.2f MiB", mib(r.gathered)) + " | " +
                                                    format("%.2f MiB", mib(r.regathered)) + " | " +
                                                    format("%.1f ms", r.waited_ms) + " ";
    out += std::string("| ") + (reference ? "replicated " : "split ") + split_cells + "| " +
           format("%.2f MiB", mib(r.peak_parameter)) + " | " +
           format("%.2f MiB", mib(r.peak_saved)) + " | " + format("%.2f MiB", mib(r.peak_total)) +
           " | " +
           (reference                         ? "reference"
            : r.losses == rows.front().losses ? "bitwise equal"
                                              : "DIFFER") +
           " |\n";
  }
  out += format(
      "\n%d processes, %.2f MiB of decoder-layer weights. A runtime that freed a checkpointed "
      "layer's weights between its replay and its backward would gather them a third time per "
      "step (%.2f MiB more with every layer checkpointed) and lower no peak: the backward runs "
      "right after the replay and needs them too. reprise keeps them.\n",
      ranks, mib(layer_bytes), mib(layer_bytes) * (ranks - 1) / ranks);
  return out;
}

}  // namespace study
