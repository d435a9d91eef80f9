#include "nn/checkpointing.h"

#include <cctype>
#include <limits>

#include "autograd/scope.h"
#include "engine/grad_mode.h"
#include "nn/moe.h"

namespace reprise::nn {

// ---- CheckpointConfig -------------------------------------------------------

namespace {

constexpr const char* kCheckpointForms =
    "none, full, every-n-layers, every-n-layers:N, op-sac, budget:BYTES (K/M/G suffix allowed)";

int64_t parse_count(std::string_view text, std::string_view spec, bool allow_suffix) {
  REPRISE_CHECK(!text.empty(), "checkpoint policy '", spec, "': missing number; expected one of ",
                kCheckpointForms);
  int64_t scale = 1;
  if (allow_suffix) {
    switch (std::toupper(static_cast<unsigned char>(text.back()))) {
      case 'K':
        scale = int64_t(1) << 10;
        break;
      case 'M':
        scale = int64_t(1) << 20;
        break;
      case 'G':
        scale = int64_t(1) << 30;
        break;
      default:
        break;
    }
    if (scale != 1) text.remove_suffix(1);
  }
  REPRISE_CHECK(!text.empty(), "checkpoint policy '", spec, "': missing number before the suffix");
  int64_t v = 0;
  for (char c : text) {
    REPRISE_CHECK(c >= '0' && c <= '9', "checkpoint policy '", spec, "': bad number '", text,
                  "'; expected one of ", kCheckpointForms);
    REPRISE_CHECK(v <= (std::numeric_limits<int64_t>::max() - (c - '0')) / 10,
                  "checkpoint policy '", spec, "': number too large");
    v = v * 10 + (c - '0');
  }
  REPRISE_CHECK(v <= std::numeric_limits<int64_t>::max() / scale, "checkpoint policy '", spec,
                "': number too large");
  return v * scale;
}

}  // namespace

CheckpointConfig CheckpointConfig::parse(std::string_view spec) {
  CheckpointConfig c;
  auto starts = [&](std::string_view p) { return spec.substr(0, p.size()) == p; };
  if (spec == "none") {
    c.kind = Kind::none;
  } else if (spec == "full") {
    c.kind = Kind::full;
  } else if (spec == "op-sac") {
    c.kind = Kind::op_sac;
  } else if (spec == "every-n-layers") {
    c.kind = Kind::every_n_layers;
  } else if (starts("every-n-layers:")) {
    c.kind = Kind::every_n_layers;
    int64_t n = parse_count(spec.substr(15), spec, false);
    REPRISE_CHECK(n >= 1 && n <= std::numeric_limits<int>::max(), "checkpoint policy '", spec,
                  "': n must be at least 1");
    c.every_n = int(n);
  } else if (starts("budget:")) {
    c.kind = Kind::budget;
    c.budget_bytes = parse_count(spec.substr(7), spec, true);
  } else {
    REPRISE_FAIL("unknown checkpoint policy '", spec, "'; expected one of ", kCheckpointForms);
  }
  return c;
}

void CheckpointConfig::set_policy(std::string_view spec) {
  const CheckpointConfig parsed = parse(spec);
  kind = parsed.kind;
  every_n = parsed.every_n;
  budget_bytes = parsed.budget_bytes;
}

std::string CheckpointConfig::policy_string() const {
  switch (kind) {
    case Kind::none:
      return "none";
    case Kind::full:
      return "full";
    case Kind::every_n_layers:
      return "every-n-layers:" + std::to_string(every_n);
    case Kind::op_sac:
      return "op-sac";
    case Kind::budget:
      return "budget:" + std::to_string(budget_bytes);
    case Kind::policy:
      return "policy:" + (policy ? policy->name() : std::string("?"));
  }
  return "?";
}

void CheckpointConfig::validate() const {
  REPRISE_CHECK(kind != Kind::every_n_layers || every_n >= 1,
                "checkpointing: every_n must be at least 1, got ", every_n);
  REPRISE_CHECK(kind != Kind::policy || policy.has_value(),
                "checkpointing: kind policy needs a policy");
  REPRISE_CHECK(kind != Kind::budget || budget_bytes >= 0,
                "checkpointing: budget_bytes must be >= 0, got ", budget_bytes);
  REPRISE_CHECK(recompute_noise_ulps >= 0, "checkpointing: recompute_noise_ulps must be >= 0, got ",
                recompute_noise_ulps);
}

autograd::RngReplay parse_rng_replay(const std::string& s) {
  if (s == "recorded") return autograd::RngReplay::recorded;
  if (s == "stash") return autograd::RngReplay::stash;
  if (s == "fresh") return autograd::RngReplay::fresh;
  REPRISE_FAIL("unknown rng replay mode '", s, "'; expected recorded, stash or fresh");
}

autograd::Verify parse_verify(const std::string& s) {
  if (s == "none") return autograd::Verify::none;
  if (s == "metadata") return autograd::Verify::metadata;
  if (s == "bitwise") return autograd::Verify::bitwise;
  REPRISE_FAIL("unknown verifier mode '", s, "'; expected none, metadata or bitwise");
}

void CheckpointConfig::write_json(json::Value& v) const {
  v.set("checkpoint_policy", policy_string());
  v.set("rng_replay", autograd::rng_replay_name(rng_replay));
  v.set("verify", autograd::verify_name(verify));
  v.set("recompute_noise_ulps", int64_t(recompute_noise_ulps));
  v.set("save_router", save_router);
  v.set("save_chunk_states", save_chunk_states);
}

CheckpointConfig CheckpointConfig::read_json(const json::Value& v, const std::string& where) {
  REPRISE_CHECK(v.is_object(), where, ": expected a JSON object, got ", json::kind_name(v.kind()));
  auto field = [&](const char* key, bool (json::Value::*is)() const,
                   const char* expected) -> const json::Value& {
    const json::Value* f = v.find(key);
    REPRISE_CHECK(f != nullptr, where, ": missing field \"", key, "\"");
    REPRISE_CHECK((f->*is)(), where, ": field \"", key, "\" must be ", expected, ", got ",
                  json::kind_name(f->kind()));
    return *f;
  };
  CheckpointConfig c =
      parse(field("checkpoint_policy", &json::Value::is_string, "a string").as_string());
  c.rng_replay =
      parse_rng_replay(field("rng_replay", &json::Value::is_string, "a string").as_string());
  c.verify = parse_verify(field("verify", &json::Value::is_string, "a string").as_string());
  const int64_t noise = field("recompute_noise_ulps", &json::Value::is_int, "an integer").as_int();
  REPRISE_CHECK(noise >= 0 && noise <= std::numeric_limits<int>::max(), where,
                ": recompute_noise_ulps out of range: ", noise);
  c.recompute_noise_ulps = int(noise);
  // Absent from files written before the field existed: the default.
  if (v.find("save_router") != nullptr) {
    c.save_router = field("save_router", &json::Value::is_bool, "a boolean").as_bool();
  }
  if (v.find("save_chunk_states") != nullptr) {
    c.save_chunk_states = field("save_chunk_states", &json::Value::is_bool, "a boolean").as_bool();
  }
  return c;
}

std::vector<std::string> op_sac_ops() {
  return {"linear", "sdpa", "sdpa_dropout", "gated_delta_rule"};
}

// ---- LayerCheckpointing -----------------------------------------------------

LayerCheckpointing::LayerCheckpointing(CheckpointConfig config,
                                       std::shared_ptr<rng::Generator> generator,
                                       const MoeScopes& moe)
    : config_(std::move(config)) {
  using Kind = CheckpointConfig::Kind;
  config_.validate();
  options_.rng = config_.rng_replay;
  REPRISE_CHECK(generator != nullptr, "LayerCheckpointing: no generator (pass the model's dropout ",
                "generator)");
  options_.generator = std::move(generator);
  options_.verify = config_.verify;
  options_.recompute_noise_ulps = config_.recompute_noise_ulps;
  options_.noise_seed = config_.noise_seed;
  options_.noise_scopes = config_.noise_scopes;
  options_.on_mismatch = config_.on_mismatch;
  switch (config_.kind) {
    case Kind::none:
      break;
    case Kind::full:
    case Kind::every_n_layers:
      policy_ = autograd::policies::full();
      break;
    case Kind::op_sac:
      policy_ = autograd::policies::op_sac(op_sac_ops());
      break;
    case Kind::budget:
      planner_.emplace(config_.budget_bytes);
      policy_ = planner_->policy();
      break;
    case Kind::policy:
      policy_ = *config_.policy;
      break;
  }
  if (!policy_) return;
  // Decided whatever the layer policy says (its region hook, the budget
  // planner's, is kept): MUST_SAVE what an expert-parallel layer received
  // from other processes, so that a replay never communicates, and with
  // save_router the router's outputs, so that a recompute never re-decides
  // routing; without save_chunk_states, MUST_RECOMPUTE the delta rule's.
  std::vector<autograd::Policy> parts;
  if (!moe.empty()) {
    parts.push_back(autograd::policies::save_scopes("*." + moe.block + ".experts." +
                                                    kExpertExchangeScope + ".*"));
    if (config_.save_router) parts.push_back(autograd::policies::save_scopes(router_scopes(moe)));
  }
  if (!config_.save_chunk_states) {
    parts.push_back(autograd::policies::recompute_auxiliary("gated_delta_rule"));
  }
  if (parts.empty()) return;
  parts.push_back(*policy_);
  autograd::Policy::RegionHook hook = policy_->region_hook();
  policy_ = autograd::policies::combine(std::move(parts));
  if (hook) policy_->on_region(std::move(hook));
}

Tensor LayerCheckpointing::run(size_t i, const std::string& scope,
                               const std::function<Tensor()>& layer) {
  // Budget mode: the previous forward with grad recorded every layer's
  // graph; plan once from it, before the first layer of this forward.
  if (i == 0 && planner_ && GradMode::enabled()) {
    if (planner_recorded_ && !planner_->planned()) planner_->plan();
    planner_recorded_ = true;
  }
  const bool checkpointed =
      policy_ && GradMode::enabled() &&
      (config_.kind != CheckpointConfig::Kind::every_n_layers || i % size_t(config_.every_n) == 0);
  if (!checkpointed) {
    autograd::Scope named(scope);
    return layer();
  }
  return autograd::checkpoint(scope, *policy_, layer, options_);
}

std::function<Tensor(size_t, const std::string&, const std::function<Tensor()>&)>
LayerCheckpointing::runner() {
  return [this](size_t i, const std::string& scope, const std::function<Tensor()>& layer) {
    return run(i, scope, layer);
  };
}

}  // namespace reprise::nn
