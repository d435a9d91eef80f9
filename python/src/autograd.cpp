// Autograd from Python: backward and grad, grad mode, scopes, checkpoint
// regions with built-in or Python policies, the budget planner, the
// verifier, noise injection and the recompute counters.
//
// A Python policy costs a call into Python per value a region produces
// (bench/RESULTS.md, "Python"); the built-in policies stay C++ and the
// recording path knows nothing of Python.

#include <nanobind/stl/function.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>

#include <memory>
#include <utility>

#include "autograd/backward.h"
#include "autograd/checkpoint.h"
#include "autograd/op_registry.h"
#include "autograd/planner.h"
#include "autograd/policy.h"
#include "autograd/scope.h"
#include "autograd/verifier.h"
#include "engine/grad_mode.h"
#include "python/src/bind.h"
#include "rng/generator.h"

namespace reprise::python {

using autograd::Decision;
using autograd::Policy;
using autograd::Tensors;
using autograd::ValueInfo;

namespace {

// ---- Python policies -----------------------------------------------------------

// The error a Python policy raised on this thread, until the binding that
// ran the region raises it.
std::optional<nb::python_error>& pending_policy_error() {
  thread_local std::optional<nb::python_error> error;
  return error;
}

// What a Python policy sees of one value: a view of the C++ ValueInfo that
// is valid during the call only (copying its strings for every value would
// cost more than most policies do).
struct PyValueInfo {
  const ValueInfo* info = nullptr;
  const ValueInfo& get() const {
    REPRISE_CHECK(info != nullptr,
                  "ValueInfo: read after the policy call returned (copy the fields you need)");
    return *info;
  }
};

// Holds the callable; releases it under the GIL, since a Policy may be
// destroyed by C++ code running without it.
struct PythonCallable {
  explicit PythonCallable(nb::callable f) : fn(std::move(f)) {}
  ~PythonCallable() {
    if (!nb::is_alive()) {
      fn.release();  // the interpreter has gone, and the object with it
      return;
    }
    nb::gil_scoped_acquire gil;
    fn.reset();
  }
  PythonCallable(const PythonCallable&) = delete;
  PythonCallable& operator=(const PythonCallable&) = delete;
  nb::callable fn;
};

std::optional<Decision> ask_python(const PythonCallable& callable, const ValueInfo& v) {
  nb::gil_scoped_acquire gil;
  // After a failure the region saves what it records: correct gradients,
  // whatever the rest of the region does before the error is raised.
  if (pending_policy_error()) return Decision::must_save;
  nb::object view = nb::cast(PyValueInfo{&v});
  try {
    nb::object answer = callable.fn(view);
    nb::inst_ptr<PyValueInfo>(view)->info = nullptr;
    if (answer.is_none()) return std::nullopt;
    if (nb::isinstance<Decision>(answer)) return nb::cast<Decision>(answer);
    PyErr_Format(PyExc_TypeError,
                 "policy %R returned %R for %s at '%s': expected a reprise.Decision or None",
                 callable.fn.ptr(), answer.ptr(), v.op, v.scope.c_str());
    throw nb::python_error();
  } catch (nb::python_error& e) {
    nb::inst_ptr<PyValueInfo>(view)->info = nullptr;
    pending_policy_error().emplace(std::move(e));
    return Decision::must_save;
  }
}

std::string callable_name(nb::handle fn) {
  if (nb::hasattr(fn, "__qualname__")) return nb::cast<std::string>(fn.attr("__qualname__"));
  return nb::cast<std::string>(nb::repr(fn));
}

// ---- grad mode and scopes ----------------------------------------------------

// `with reprise.scope("layers.3"):` names the nodes recorded inside.
class ScopeContext {
 public:
  explicit ScopeContext(std::string name) : name_(std::move(name)) {}
  void enter() {
    REPRISE_CHECK(!scope_, "reprise.scope('", name_, "') is already entered");
    scope_.emplace(name_);
  }
  void exit() { scope_.reset(); }

 private:
  std::string name_;
  std::optional<autograd::Scope> scope_;
};

// A checkpoint function's result: one tensor, or a tuple or list of them.
struct RegionResult {
  bool single = true;
  Tensors tensors;
};

RegionResult region_result(nb::handle out) {
  if (nb::isinstance<Tensor>(out)) return {true, {nb::cast<Tensor>(out)}};
  REPRISE_CHECK(nb::isinstance<nb::tuple>(out) || nb::isinstance<nb::list>(out),
                "checkpoint: the function returned ",
                nb::cast<std::string>(nb::type_name(out.type())),
                "; expected a reprise.Tensor or a tuple or list of them");
  RegionResult r{false, {}};
  for (nb::handle t : out) r.tensors.push_back(nb::cast<Tensor>(t));
  return r;
}

nb::object to_python(const RegionResult& r) {
  if (r.single) return nb::cast(r.tensors.at(0));
  return nb::tuple(nb::cast(r.tensors));
}

}  // namespace

Policy python_policy(std::string name, nb::callable fn) {
  auto callable = std::make_shared<PythonCallable>(std::move(fn));
  return Policy(std::move(name),
                [callable](const ValueInfo& v) { return ask_python(*callable, v); });
}

void raise_pending_policy_error() {
  std::optional<nb::python_error>& pending = pending_policy_error();
  if (!pending) return;
  nb::python_error error = std::move(*pending);
  pending.reset();
  throw error;
}

void clear_pending_policy_error() { pending_policy_error().reset(); }

namespace {

using nb::arg;

// ---- backward, grad, grad mode, scopes ---------------------------------------

void bind_grad(nb::module_& m) {
  m.def(
      "backward",
      [](const Tensor& root, std::optional<Tensor> grad, bool retain_graph) {
        nb::gil_scoped_release released;
        autograd::backward(root, tensor_or_undefined(grad), {.retain_graph = retain_graph});
      },
      arg("root"), arg("grad") = nb::none(), arg("retain_graph") = false,
      "Accumulates d(root)/d(leaf) into leaf.grad for every leaf that requires grad; root must "
      "be a scalar unless grad (same shape) is given. Replays checkpoint regions as needed.");
  m.def(
      "grad",
      [](const Tensors& outputs, const Tensors& inputs, std::optional<Tensors> grad_outputs,
         bool retain_graph, bool allow_unused) {
        Tensors grads;
        {
          nb::gil_scoped_release released;
          grads = autograd::grad(outputs, inputs, grad_outputs.value_or(Tensors{}),
                                 {.retain_graph = retain_graph}, allow_unused);
        }
        nb::list out;
        for (const Tensor& g : grads) out.append(tensor_or_none(g));
        return out;
      },
      arg("outputs"), arg("inputs"), arg("grad_outputs") = nb::none(), arg("retain_graph") = false,
      arg("allow_unused") = false,
      "d(sum_i <outputs[i], grad_outputs[i]>)/d(inputs[j]) for each input, without touching "
      ".grad; None for an unused input when allow_unused.");
  m.def("is_grad_enabled", &GradMode::enabled, "Whether ops record onto the tape (per thread).");
  m.def("set_grad_enabled", &GradMode::set_enabled, arg("enabled"));

  nb::class_<ScopeContext>(m, "scope",
                           "with reprise.scope('layers.3'): ... names the nodes recorded "
                           "inside (nested scopes join with dots), as the nn modules do.")
      .def(nb::init<std::string>(), arg("name"))
      .def(
          "__enter__",
          [](ScopeContext& s) -> ScopeContext& {
            s.enter();
            return s;
          },
          nb::rv_policy::reference)
      .def("__exit__", [](ScopeContext& s, nb::args) { s.exit(); });
  m.def(
      "current_scope", [] { return *autograd::current_scope(); },
      "The current thread's scope path ('' at top level).");
}

// ---- policies ----------------------------------------------------------------

// What a policy is asked about each value, and its answer.
void bind_value_info(nb::module_& m) {
  nb::enum_<Decision>(m, "Decision",
                      "A policy's answer for one value: across nested regions and combine(), "
                      "the first MUST (innermost first) wins, else the first PREFER.")
      .value("must_save", Decision::must_save)
      .value("prefer_save", Decision::prefer_save)
      .value("prefer_recompute", Decision::prefer_recompute)
      .value("must_recompute", Decision::must_recompute);

  nb::class_<PyValueInfo>(m, "ValueInfo",
                          "What a policy sees of one value a region produces: output `output` "
                          "of a recorded node. Valid during the policy call only.")
      .def_prop_ro(
          "op", [](const PyValueInfo& v) { return std::string(v.get().op); },
          "The producing op's registered name ('linear', 'sdpa', ...).")
      .def_prop_ro(
          "scope", [](const PyValueInfo& v) { return v.get().scope; },
          "The producing node's scope ('model.layers.3.self_attn.q_proj').")
      .def_prop_ro(
          "region", [](const PyValueInfo& v) { return v.get().region; },
          "The innermost region's scope.")
      .def_prop_ro("output", [](const PyValueInfo& v) { return v.get().output; })
      .def_prop_ro(
          "auxiliary", [](const PyValueInfo& v) { return v.get().auxiliary; },
          "An output kept for backward only (e.g. a logsumexp).")
      .def_prop_ro("is_random", [](const PyValueInfo& v) { return v.get().is_random; })
      .def_prop_ro("shape",
                   [](const PyValueInfo& v) { return nb::tuple(nb::cast(v.get().meta.shape)); })
      .def_prop_ro("dtype", [](const PyValueInfo& v) { return v.get().meta.dtype; })
      .def_prop_ro("device", [](const PyValueInfo& v) { return v.get().meta.device; })
      .def_prop_ro("bytes", [](const PyValueInfo& v) { return v.get().bytes; })
      .def_prop_ro(
          "flops", [](const PyValueInfo& v) { return v.get().flops; },
          "Cost of recomputing the producing node alone.")
      .def_prop_ro(
          "op_ordinal", [](const PyValueInfo& v) { return v.get().op_ordinal; },
          "Earlier nodes of the same op in the region.")
      .def_prop_ro("node_index", [](const PyValueInfo& v) { return v.get().node_index; })
      .def("__repr__", [](const PyValueInfo& v) {
        if (!v.info) return std::string("<reprise.ValueInfo (expired)>");
        return "<reprise.ValueInfo " + std::string(v.info->op) + " output " +
               std::to_string(v.info->output) + " at '" + v.info->scope + "', " +
               v.info->meta.describe() + ">";
      });
}

// Policy, the built-in policies (reprise.policies) and their combinations.
void bind_policies(nb::module_& m) {
  nb::class_<Policy>(m, "Policy",
                     "A named recompute policy. Anywhere a Policy is taken, a Python callable "
                     "(ValueInfo) -> Decision | None works too.")
      .def_prop_ro("name", &Policy::name)
      .def("__repr__", [](const Policy& p) { return "<reprise.Policy " + p.name() + ">"; });

  nb::module_ policies = m.def_submodule("policies", "Built-in recompute policies.");
  policies.def("full", &autograd::policies::full,
               "Recompute everything; keep only the region's inputs.");
  policies.def("save_all", &autograd::policies::save_all, "Save everything.");
  policies.def("save_ops", &autograd::policies::save_ops, arg("ops"),
               "Save the outputs of the named ops, recompute the rest.");
  policies.def("save_every_nth", &autograd::policies::save_every_nth, arg("op"), arg("n"),
               "Save the 1st, (n+1)-th, ... node of op in each region, recompute the others.");
  policies.def("op_sac", &autograd::policies::op_sac, arg("ops"), arg("matmul_op") = "linear",
               "torchtitan's op-level selective checkpointing.");
  policies.def("save_scopes", &autograd::policies::save_scopes, arg("glob"),
               "Force-save values produced under matching scopes ('*.router.*').");
  policies.def("recompute_scopes", &autograd::policies::recompute_scopes, arg("glob"));
  policies.def("recompute_auxiliary", &autograd::policies::recompute_auxiliary, arg("op"),
               "Force-recompute what op keeps for its backward only (sdpa's logsumexp, "
               "gated_delta_rule's chunk states).");
  policies.def(
      "predicate",
      [](std::string name, nb::callable fn) {
        return python_policy(std::move(name), std::move(fn));
      },
      arg("name"), arg("fn"),
      "A named policy from a Python callable (ValueInfo) -> Decision | None.");
  policies.def(
      "combine",
      [](const std::vector<PolicyLike>& parts) {
        std::vector<Policy> policies;
        for (const PolicyLike& p : parts) policies.push_back(p.get());
        return autograd::policies::combine(std::move(policies));
      },
      arg("parts"), "First MUST among the parts, else first PREFER, else abstain.");
  m.def("glob_match", &autograd::glob_match, arg("pattern"), arg("text"),
        "Shell-style glob as the scope policies use it.");
}

// ---- checkpoint --------------------------------------------------------------

// The enums of checkpoint()'s options: RNG replay and the verifier's.
void bind_checkpoint_options(nb::module_& m) {
  nb::enum_<autograd::RngReplay>(m, "RngReplay", "How random ops get their numbers on replay.")
      .value("recorded", autograd::RngReplay::recorded, "the recorded reservation: exact")
      .value("stash", autograd::RngReplay::stash, "PyTorch's preserve_rng_state=True")
      .value("fresh", autograd::RngReplay::fresh,
             "PyTorch's preserve_rng_state=False: wrong gradients with dropout, on purpose");
  nb::enum_<autograd::Verify>(m, "Verify", "What the recompute verifier compares.")
      .value("none", autograd::Verify::none)
      .value("metadata", autograd::Verify::metadata)
      .value("bitwise", autograd::Verify::bitwise);
  nb::enum_<autograd::OnMismatch>(m, "OnMismatch")
      .value("raise_", autograd::OnMismatch::raise, "raise reprise.Error at the first mismatch")
      .value("report", autograd::OnMismatch::report, "collect them for take_mismatches()");
}

void bind_checkpoint(nb::module_& m) {
  m.def(
      "checkpoint",
      [](const std::string& scope, PolicyLike policy, nb::callable fn, autograd::RngReplay rng,
         std::shared_ptr<rng::Generator> generator, autograd::Verify verify,
         autograd::OnMismatch on_mismatch, int recompute_noise_ulps, uint64_t noise_seed,
         std::string noise_scopes) {
        RegionResult result;
        const std::function<Tensors()> run = [&] {
          try {
            result = region_result(fn());
          } catch (nb::python_error& e) {
            // A Python error keeps its traceback; the note names the region.
            if (nb::hasattr(e.value(), "add_note")) {
              e.value().attr("add_note")("in checkpoint region '" + *autograd::current_scope() +
                                         "'");
            }
            throw;
          }
          return result.tensors;
        };
        // The region shares the generator (nanobind's shared_ptr holds the
        // Python object), so a generator dropped before backward lives on.
        const autograd::CheckpointOptions options{.rng = rng,
                                                  .generator = std::move(generator),
                                                  .verify = verify,
                                                  .on_mismatch = on_mismatch,
                                                  .recompute_noise_ulps = recompute_noise_ulps,
                                                  .noise_seed = noise_seed,
                                                  .noise_scopes = std::move(noise_scopes)};
        result.tensors =
            recording([&] { return autograd::checkpoint(scope, policy.get(), run, options); });
        return to_python(result);
      },
      arg("scope"), arg("policy"), arg("fn"), nb::kw_only(),
      arg("rng") = autograd::RngReplay::recorded, arg("generator") = nb::none(),
      arg("verify") = autograd::Verify::none, arg("on_mismatch") = autograd::OnMismatch::raise,
      arg("recompute_noise_ulps") = 0, arg("noise_seed") = autograd::CheckpointOptions{}.noise_seed,
      arg("noise_scopes") = "*",
      nb::sig("def checkpoint(scope: str, policy: Policy | Callable[[ValueInfo], Decision | None], "
              "fn: Callable[[], Tensor | Sequence[Tensor]], *, rng: RngReplay = ..., generator: "
              "Generator | None = None, verify: Verify = ..., on_mismatch: OnMismatch = ..., "
              "recompute_noise_ulps: int = 0, noise_seed: int = 24301, noise_scopes: str = '*') "
              "-> Tensor | tuple[Tensor, ...]"),
      "Runs fn() once as a checkpoint region named scope and returns what it returns (a "
      "Tensor, or a tuple of them). At region exit the policy decides, per value, whether "
      "backward reads it from memory or replays the recorded ops (never fn) to recompute it.\n\n"
      "rng: how random ops replay (stash and fresh draw from generator, default: the default "
      "generator); verify: compare replayed values with the forward's (bitwise names the first "
      "diverging node); recompute_noise_ulps > 0 perturbs replayed values under noise_scopes "
      "by up to that many ulps, to emulate non-bit-exact kernels.\n\n"
      "A policy that raises (or returns something else than a Decision or None) is not asked "
      "again: the rest of the region is saved, and its exception is raised when fn returns.");
  m.def(
      "checkpoint_sequential",
      [](const std::string& scope, const std::vector<nb::callable>& stages, int segments,
         const Tensor& x, PolicyLike policy) {
        std::vector<std::function<Tensor(const Tensor&)>> fns;
        for (const nb::callable& stage : stages) {
          fns.emplace_back([stage](const Tensor& in) { return nb::cast<Tensor>(stage(in)); });
        }
        return recording(
            [&] { return autograd::checkpoint_sequential(scope, fns, segments, x, policy.get()); });
      },
      arg("scope"), arg("stages"), arg("segments"), arg("x"), arg("policy"),
      "Chains x through the stages, checkpointing `segments` consecutive groups of them as "
      "regions '<scope>.<first stage index>'.");
}

void bind_recompute_stats(nb::module_& m) {
  nb::class_<autograd::RecomputeStats>(
      m, "RecomputeStats",
      "Counters over all checkpoint regions on this thread; subtract two readings to get the "
      "counts between them.")
      .def_ro("regions", &autograd::RecomputeStats::regions)
      .def_ro("values_dropped", &autograd::RecomputeStats::values_dropped)
      .def_ro("bytes_dropped", &autograd::RecomputeStats::bytes_dropped)
      .def_ro("replays", &autograd::RecomputeStats::replays)
      .def_ro("nodes_replayed", &autograd::RecomputeStats::nodes_replayed)
      .def_ro("rng_bytes_stashed", &autograd::RecomputeStats::rng_bytes_stashed)
      .def_ro("mismatches", &autograd::RecomputeStats::mismatches)
      .def_ro("replay_seconds", &autograd::RecomputeStats::replay_seconds)
      .def("__sub__", [](const autograd::RecomputeStats& a,
                         const autograd::RecomputeStats& b) { return a - b; })
      .def("__repr__", [](const autograd::RecomputeStats& s) {
        return "RecomputeStats(regions=" + std::to_string(s.regions) +
               ", values_dropped=" + std::to_string(s.values_dropped) +
               ", bytes_dropped=" + std::to_string(s.bytes_dropped) +
               ", replays=" + std::to_string(s.replays) +
               ", nodes_replayed=" + std::to_string(s.nodes_replayed) +
               ", rng_bytes_stashed=" + std::to_string(s.rng_bytes_stashed) +
               ", mismatches=" + std::to_string(s.mismatches) +
               ", replay_seconds=" + std::to_string(s.replay_seconds) + ")";
      });
  m.def(
      "recompute_stats", [] { return autograd::recompute_stats(); },
      "A copy of this thread's counters.");
}

// ---- budget planner ----------------------------------------------------------

void bind_planner(nb::module_& m) {
  using Summary = autograd::BudgetPlanner::Summary;
  nb::class_<Summary>(m, "PlannerSummary")
      .def_ro("budget", &Summary::budget)
      .def_ro("planned_bytes", &Summary::planned_bytes)
      .def_ro("replay_flops", &Summary::replay_flops)
      .def_ro("full_replay_flops", &Summary::full_replay_flops)
      .def_ro("replay_cost", &Summary::replay_cost)
      .def_ro("full_replay_cost", &Summary::full_replay_cost)
      .def_ro("values_kept", &Summary::values_kept)
      .def_ro("values", &Summary::values);
  nb::class_<autograd::BudgetPlanner>(
      m, "BudgetPlanner",
      "Record once, apply many: run one step with planner.policy() on every region, call "
      "plan(), and later steps keep the values that replay least within the byte budget "
      "(autograd/planner.h).")
      .def(
          "__init__",
          [](autograd::BudgetPlanner* p, int64_t budget_bytes, double flops_per_byte) {
            new (p) autograd::BudgetPlanner(budget_bytes, {.flops_per_byte = flops_per_byte});
          },
          arg("budget_bytes"), arg("flops_per_byte") = 10.0)
      .def("policy", &autograd::BudgetPlanner::policy)
      .def("plan", &autograd::BudgetPlanner::plan)
      .def("planned", &autograd::BudgetPlanner::planned)
      .def("summary", &autograd::BudgetPlanner::summary);
}

// ---- verifier ----------------------------------------------------------------

void bind_verifier(nb::module_& m) {
  nb::class_<autograd::Mismatch>(m, "Mismatch", "A replayed value that differs from the forward's.")
      .def_ro("region", &autograd::Mismatch::region)
      .def_ro("scope", &autograd::Mismatch::scope)
      .def_ro("op", &autograd::Mismatch::op)
      .def_ro("output", &autograd::Mismatch::output)
      .def_ro("expected", &autograd::Mismatch::expected)
      .def_ro("actual", &autograd::Mismatch::actual)
      .def_ro("differing", &autograd::Mismatch::differing,
              "Elements that differ (-1: a metadata mismatch).")
      .def_ro("max_ulp", &autograd::Mismatch::max_ulp)
      .def("describe", &autograd::Mismatch::describe)
      .def("__repr__", &autograd::Mismatch::describe);
  m.def("take_mismatches", &autograd::take_mismatches,
        "Mismatches reported (on_mismatch=report) on this thread since the last call.");
  m.def("hash_values", &autograd::hash_values, arg("t"),
        "64-bit hash of t's values in row-major order (any layout).");
  m.def(
      "ulp_difference",
      [](const Tensor& a, const Tensor& b) { return autograd::ulp_difference(a, b); }, arg("a"),
      arg("b"), "(differing elements, largest ulp distance) of two same-shape floating tensors.");
}

// ---- op registry -------------------------------------------------------------

void bind_op_registry(nb::module_& m) {
  nb::class_<autograd::OpInfo>(m, "OpInfo", "A registered op.")
      .def_prop_ro("name", [](const autograd::OpInfo& op) { return std::string(op.name); })
      .def_ro("is_random", &autograd::OpInfo::is_random)
      .def("__repr__", [](const autograd::OpInfo& op) {
        return "<reprise.OpInfo " + std::string(op.name) + ">";
      });
  m.def("registered_ops", &autograd::registered_ops, nb::rv_policy::reference,
        "Every op policies can name, in registration order.");
}

}  // namespace

void bind_autograd(nb::module_& m) {
  bind_grad(m);
  bind_value_info(m);
  bind_policies(m);
  bind_checkpoint_options(m);
  bind_checkpoint(m);
  bind_recompute_stats(m);
  bind_planner(m);
  bind_verifier(m);
  bind_op_registry(m);
}

}  // namespace reprise::python

namespace nanobind::detail {

bool type_caster<reprise::python::PolicyLike>::from_python(handle src, uint8_t flags,
                                                           cleanup_list* cleanup) noexcept {
  if (isinstance<reprise::autograd::Policy>(src)) {
    value.value = cast<reprise::autograd::Policy>(src);
    return true;
  }
  if (!PyCallable_Check(src.ptr())) return false;
  try {
    value.value =
        reprise::python::python_policy(reprise::python::callable_name(src), borrow<callable>(src));
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace nanobind::detail
