// reprise.nn, continued: rollouts (batched generation with log-probs and
// routing records), the training side's next_token_logprobs, and routing
// capture and replay as context managers.

#include "nn/rollout.h"

#include <nanobind/stl/unique_ptr.h>

#include <memory>
#include <optional>

#include "nn/llama.h"
#include "nn/routing.h"
#include "python/src/bind.h"

namespace reprise::python {

// reprise.nn.RoutingCapture and RoutingReplay: their C++ guards, opened by
// `with` (a guard acts on the thread that opens it).
struct RoutingCaptureScope {
  std::optional<nn::RoutingCapture> capture;
  std::vector<nn::RoutingRecord> records(int64_t batch, int64_t positions) const {
    REPRISE_CHECK(capture, "RoutingCapture: open it with `with` before asking for records");
    return capture->records(batch, positions);
  }
};

struct RoutingReplayScope {
  std::vector<nn::RoutingRecord> records;
  int64_t positions;
  std::optional<nn::RoutingReplay> replay;
  int64_t overridden = 0;  // kept once the scope closes
};

namespace {

using nb::arg;

// A (P, L, k) or (P, L) i64 tensor of a record's position-major values.
template <class T>
Tensor record_tensor(const std::vector<T>& values, Shape shape) {
  return Tensor::from_vector(std::vector<int64_t>(values.begin(), values.end()), shape);
}

void bind_routing_record(nb::module_& m) {
  nb::class_<nn::RoutingRecord>(m, "RoutingRecord",
                                "Which experts each position of one sequence chose in each MoE "
                                "layer (nn/routing.h).")
      .def_ro("layers", &nn::RoutingRecord::layers)
      .def_ro("num_experts", &nn::RoutingRecord::num_experts)
      .def_ro("k", &nn::RoutingRecord::k)
      .def_ro("positions", &nn::RoutingRecord::positions)
      .def_prop_ro(
          "experts",
          [](const nn::RoutingRecord& r) {
            return record_tensor(r.experts, {r.positions, int64_t(r.layers.size()), r.k});
          },
          "(P, L, k) i64: the experts, best first.")
      .def_prop_ro(
          "margin",
          [](const nn::RoutingRecord& r) {
            return record_tensor(r.margin, {r.positions, int64_t(r.layers.size())});
          },
          "(P, L) i64: ulps from each k-th choice down to the best expert not chosen.")
      .def("first_positions", &nn::RoutingRecord::first_positions, arg("count"));
  m.def(
      "routing_record",
      [](std::vector<std::string> layers, int64_t num_experts, const Tensor& experts,
         const std::optional<Tensor>& margin) {
        return nn::routing_record(std::move(layers), num_experts, experts,
                                  tensor_or_undefined(margin));
      },
      arg("layers"), arg("num_experts"), arg("experts"), arg("margin") = nb::none(),
      "A record from plain arrays (another engine's): experts (P, L, k) integers, best first; "
      "margin (P, L) i64 or None.");
  m.def("save_routing_records", &nn::save_routing_records, arg("path"), arg("records"),
        "One safetensors file of records (U16 experts per sequence), written atomically.");
  m.def("load_routing_records", &nn::load_routing_records, arg("path"),
        "The records of a save_routing_records file, validated.");
  m.def("routing_flips", &nn::routing_flips, arg("a"), arg("b"),
        "The (layer, position) pairs whose expert sets differ between two records of one "
        "sequence.");

  nb::class_<RoutingCaptureScope>(m, "RoutingCapture",
                                  "`with RoutingCapture() as c:` captures the routing of every "
                                  "MoE layer run inside; c.records(B, T) cuts one forward of (B, "
                                  "T) into a record per sequence.")
      .def(nb::init<>())
      .def("__enter__",
           [](nb::object self) {
             auto& s = nb::cast<RoutingCaptureScope&>(self);
             REPRISE_CHECK(!s.capture, "RoutingCapture: this capture is already open");
             s.capture.emplace();
             return self;
           })
      .def("__exit__",
           [](RoutingCaptureScope& s, nb::args) {
             if (s.capture) s.capture->close();
           })
      .def("records", &RoutingCaptureScope::records, arg("batch"), arg("positions"));

  nb::class_<RoutingReplayScope>(
      m, "RoutingReplay",
      "`with RoutingReplay(records, T):` routes the MoE layers of a forward of (B, T) by one "
      "record per sequence (rollout routing replay); overridden counts the flips it prevented.")
      .def(
          "__init__",
          [](RoutingReplayScope* self, std::vector<nn::RoutingRecord> records, int64_t positions) {
            new (self) RoutingReplayScope{std::move(records), positions, std::nullopt};
          },
          arg("records"), arg("positions"))
      .def("__enter__",
           [](nb::object self) {
             auto& s = nb::cast<RoutingReplayScope&>(self);
             REPRISE_CHECK(!s.replay, "RoutingReplay: this replay is already open");
             s.replay.emplace(s.records, s.positions);
             return self;
           })
      .def("__exit__",
           [](RoutingReplayScope& s, nb::args) {
             if (!s.replay) return;
             s.overridden = s.replay->overridden();
             s.replay.reset();
           })
      .def_prop_ro("overridden", [](const RoutingReplayScope& s) {
        return s.replay ? s.replay->overridden() : s.overridden;
      });
}

std::vector<nn::Rollout> generate_rollouts(const nn::LlamaForCausalLM& model,
                                           const std::vector<std::vector<int64_t>>& prompts,
                                           int64_t max_new_tokens, double temperature,
                                           int64_t top_k, double top_p, uint64_t seed,
                                           std::vector<int64_t> stop_tokens, int64_t choose_below,
                                           std::vector<uint64_t> sequence_ids,
                                           bool record_routing) {
  nn::RolloutOptions o;
  o.max_new_tokens = max_new_tokens;
  o.sampling = {.temperature = temperature, .top_k = top_k, .top_p = top_p};
  o.seed = seed;
  o.stop_tokens = std::move(stop_tokens);
  o.choose_below = choose_below;
  o.sequence_ids = std::move(sequence_ids);
  o.record_routing = record_routing;
  nb::gil_scoped_release release;
  return nn::generate(model, prompts, o);
}

}  // namespace

void bind_rollout(nb::module_& m) {
  bind_routing_record(m);
  nb::class_<nn::Rollout>(m, "Rollout", "One sequence's continuation (nn/rollout.h).")
      .def_ro("tokens", &nn::Rollout::tokens, "The new tokens (a stop token included).")
      .def_ro("logprobs", &nn::Rollout::logprobs,
              "log p(token) under the model (temperature 1, every id), f32 values.")
      .def_prop_ro("stop", [](const nn::Rollout& r) { return nn::stop_reason_name(r.stop); })
      .def_ro("routing", &nn::Rollout::routing,
              "With record_routing: the experts of every position of prompt + tokens.");
  m.def("generate", &generate_rollouts, arg("model"), arg("prompts"), arg("max_new_tokens") = 64,
        arg("temperature") = 0.0, arg("top_k") = 0, arg("top_p") = 1.0, arg("seed") = 0,
        arg("stop_tokens") = std::vector<int64_t>{}, arg("choose_below") = 0,
        arg("sequence_ids") = std::vector<uint64_t>{}, arg("record_routing") = false,
        "Continues every prompt (lists of ids) -> [Rollout]. A sequence's tokens and log-probs "
        "are bit for bit the same alone or in any batch, and equal next_token_logprobs of the "
        "training forward over prompt + tokens. It samples from the stream 'sample.<id>' of "
        "seed, id its sequence_ids entry (default: its index).");
  m.def("next_token_logprobs", &nn::next_token_logprobs, arg("logits"), arg("ids"),
        "logits (B, T, V), ids (B, T) i64 -> (B, T - 1): log_softmax(logits[b, t])[ids[b, t + "
        "1]], recorded.");
}

}  // namespace reprise::python
