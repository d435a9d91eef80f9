#include "autograd/checkpoint.h"

#include <chrono>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "autograd/recompute_noise.h"
#include "autograd/scope.h"
#include "autograd/tape.h"
#include "autograd/tracer.h"
#include "engine/current_op.h"
#include "engine/memory_limit.h"
#include "rng/generator.h"

namespace reprise::autograd {
namespace {

// A value a region node reads: nothing (an undefined optional input), an
// input from outside the region, or output `output` of region node `index`.
struct ValueRef {
  enum class Kind : uint8_t { none, external, produced };
  Kind kind = Kind::none;
  int32_t index = 0;
  uint32_t output = 0;
};

using ValueKey = uint64_t;
ValueKey key_of(int32_t node, uint32_t output) { return (uint64_t(node) << 32) | output; }
ValueRef ref_of(ValueKey key) {
  return {ValueRef::Kind::produced, int32_t(key >> 32), uint32_t(key & 0xffffffffu)};
}

// Which value a tensor the region has seen is: TensorImpl* -> ValueRef, with
// a weak handle so that a reused address is not taken for the old tensor.
// A region sees tens of tensors (a transformer block about 35), where a scan
// from the newest entry finds most inputs (the previous node's outputs) at
// once and allocates nothing per entry; past kScanned entries it adds a hash
// index.
class TensorIndex {
 public:
  std::optional<ValueRef> find(const Tensor& t) const {
    const Entry* e = entry(t.impl());
    if (e == nullptr || e->handle.lock() != t.impl_ptr()) return std::nullopt;
    return e->ref;
  }

  // Adds t as `ref`, or makes an entry at t's address refer to it (an
  // in-place op's output, or a new tensor at a freed one's address).
  void set(const Tensor& t, ValueRef ref) {
    if (Entry* e = entry(t.impl())) {
      *e = {t.impl(), t.impl_ptr(), ref};
      return;
    }
    entries_.push_back({t.impl(), t.impl_ptr(), ref});
    if (entries_.size() > kScanned) {
      if (hashed_.empty()) {
        for (size_t i = 0; i < entries_.size(); ++i) hashed_[entries_[i].key] = i;
      } else {
        hashed_[t.impl()] = entries_.size() - 1;
      }
    }
  }

  void clear() {
    entries_ = {};
    hashed_ = {};
  }

 private:
  static constexpr size_t kScanned = 64;
  struct Entry {
    TensorImpl* key;
    std::weak_ptr<TensorImpl> handle;
    ValueRef ref;
  };

  Entry* entry(TensorImpl* key) { return const_cast<Entry*>(std::as_const(*this).entry(key)); }
  const Entry* entry(TensorImpl* key) const {
    if (!hashed_.empty()) {
      auto it = hashed_.find(key);
      return it == hashed_.end() ? nullptr : &entries_[it->second];
    }
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
      if (it->key == key) return &*it;
    }
    return nullptr;
  }

  std::vector<Entry> entries_;
  std::unordered_map<TensorImpl*, size_t> hashed_;  // key -> entry, past kScanned entries
};

// What the region keeps of one output of a recorded node.
struct RecordedOutput {
  Decision decision = Decision::prefer_recompute;
  int64_t bytes = 0;
  bool read_by_backward = false;  // a saved slot of the tape reads it
  bool counted_dropped = false;   // counted once in recompute_stats().values_dropped
  // After exit: dropped saved slots of live nodes that read it, and replayed
  // nodes that read it.
  int64_t dropped_slots = 0;
  int64_t replay_readers = 0;
  // A kept value replay may read: held from record to exit, then only when
  // a replayed node reads it.
  SavedTensor held;
  bool held_for_replay = false;
  Fingerprint fingerprint;  // when verifying
};

// What the region keeps of one recorded node to replay it.
struct RecordedNode {
  std::weak_ptr<Node> node;
  const OpInfo* op;
  std::shared_ptr<const std::string> scope;
  uint64_t sequence_nr;
  Node::ForwardFn forward;
  std::optional<rng::Reservation> rng;
  std::vector<ValueRef> inputs;
  double flops;
  double bytes_moved;
  std::vector<RecordedOutput> outputs;
};

// Adds the wall time of the outermost replay running on this thread to
// recompute_stats().replay_seconds. A replay can start another: a node it
// re-executes may read a value that an enclosing region dropped.
class ReplayTimer {
 public:
  ReplayTimer() {
    if (depth()++ == 0) start_ = std::chrono::steady_clock::now();
  }
  ~ReplayTimer() {
    if (--depth() == 0) {
      recompute_stats().replay_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
  }
  ReplayTimer(const ReplayTimer&) = delete;
  ReplayTimer& operator=(const ReplayTimer&) = delete;

 private:
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
  std::chrono::steady_clock::time_point start_;
};

class Region;
std::vector<Region*>& region_stack() {
  thread_local std::vector<Region*> stack;
  return stack;
}

// Bookkeeping is per node and per output, in vectors: recording a region
// allocates little beyond the nodes themselves (bench_checkpoint's
// BM_Region_* cases measure it).
class Region final : public TapeObserver, public std::enable_shared_from_this<Region> {
 public:
  // `policy` is read only while recording and at exit (finish), which the
  // caller's policy outlives.
  Region(std::string scope, const Policy& policy, CheckpointOptions options)
      : scope_(std::move(scope)), policy_(&policy), options_(std::move(options)) {}

  const Policy& policy() const { return *policy_; }
  rng::Generator& generator() const {
    return options_.generator ? *options_.generator : rng::default_generator();
  }

  void enter() {
    if (options_.rng == RngReplay::stash) {
      stash_ = generator().state();
      recompute_stats().rng_bytes_stashed += int64_t(stash_->to_bytes().size());
    }
    ++recompute_stats().regions;
  }

  void on_record(const std::shared_ptr<Node>& node, const Tensors& inputs,
                 const Tensors& outputs) override {
    if (region_stack().back() != this) return;  // an inner region records its own nodes
    int32_t index = int32_t(nodes_.size());
    RecordedNode& r = nodes_.emplace_back(RecordedNode{node,
                                                       &node->op(),
                                                       node->scope_path(),
                                                       node->sequence_nr(),
                                                       node->forward,
                                                       node->rng,
                                                       {},
                                                       node->flops,
                                                       node->bytes,
                                                       {}});
    r.inputs.reserve(inputs.size());
    for (const Tensor& t : inputs) r.inputs.push_back(resolve_input(t));
    int64_t ordinal = next_ordinal(node->name());
    r.outputs.resize(outputs.size());
    for (uint32_t j = 0; j < outputs.size(); ++j) {
      RecordedOutput& out = r.outputs[j];
      out.bytes = int64_t(outputs[j].nbytes());
      ValueInfo info{node->name(),
                     node->scope(),
                     scope_,
                     j,
                     j >= node->num_public_outputs,
                     node->op().is_random,
                     node->outputs[j],
                     out.bytes,
                     node->flops,
                     ordinal,
                     index};
      out.decision = decide(info);
      // A value the policy keeps may be needed to replay a later node, and
      // may have no other owner by region exit: hold it until then.
      if (is_save(out.decision)) out.held = SavedTensor(outputs[j]);
      if (j < node->num_public_outputs) {
        tensors_.set(outputs[j], {ValueRef::Kind::produced, index, j});
      }
      if (options_.verify != Verify::none) {
        out.fingerprint = Fingerprint::of(outputs[j], options_.verify);
      }
    }
    drop_saved(index, *node);
  }

  // Region exit: plan the replay of what was dropped; keep only what it reads.
  // A region that fn left by throwing is finished too, but not shown to the
  // policy's region hook (a planner would record a partial region).
  void finish(bool completed = true) {
    // Nodes to replay: producers of dropped values that a live node reads
    // (a dead node's slots can never be read) and, transitively, of the
    // recomputed values they read. Producers precede consumers, so one
    // backward pass over the recording order closes the set.
    std::vector<bool> needed;
    for (const auto& [node, key] : dropped_) {
      if (node.expired()) continue;
      ++output(ref_of(key)).dropped_slots;
      if (needed.empty()) needed.resize(nodes_.size(), false);
      needed[size_t(key >> 32)] = true;
    }
    dropped_.clear();

    if (completed && policy_->region_hook()) policy_->region_hook()(graph());
    policy_ = nullptr;
    tensors_.clear();

    if (needed.empty()) {
      // Nothing to replay: release what was recorded for it.
      nodes_.clear();
      externals_.clear();
      return;
    }
    std::vector<bool> external_needed(externals_.size(), false);
    for (size_t i = nodes_.size(); i-- > 0;) {
      if (!needed[i]) continue;
      for (const ValueRef& ref : nodes_[i].inputs) {
        if (ref.kind == ValueRef::Kind::external) {
          external_needed[size_t(ref.index)] = true;
        } else if (ref.kind == ValueRef::Kind::produced) {
          RecordedOutput& in = output(ref);
          if (is_save(in.decision)) {
            in.held_for_replay = true;
          } else {
            needed[size_t(ref.index)] = true;
            ++in.replay_readers;
          }
        }
      }
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (needed[i]) replay_order_.push_back(int32_t(i));
      for (RecordedOutput& out : nodes_[i].outputs) {
        if (!out.held_for_replay) out.held = SavedTensor();
      }
    }
    for (size_t e = 0; e < externals_.size(); ++e) {
      if (!external_needed[e]) externals_[e].release();
    }
  }

 private:
  RecordedOutput& output(const ValueRef& ref) {
    return nodes_[size_t(ref.index)].outputs[ref.output];
  }

  // Earlier nodes of op `name` in this region; counts this one.
  int64_t next_ordinal(std::string_view name) {
    for (auto& [op, count] : op_counts_) {
      if (op == name) return count++;
    }
    op_counts_.emplace_back(name, 1);
    return 0;
  }

  // Drops the node's saved tensors whose values the policies recompute,
  // right away, so that the region's own forward runs in less memory.
  void drop_saved(int32_t index, Node& node) {
    const RecordedNode& r = nodes_[size_t(index)];
    for (size_t k = 0; k < node.saved_slots.size(); ++k) {
      const SavedSlot& slot = node.saved_slots[k];
      ValueRef ref = slot.source == SavedSlot::Source::output
                         ? ValueRef{ValueRef::Kind::produced, index, slot.index}
                         : r.inputs[slot.index];
      if (ref.kind != ValueRef::Kind::produced) continue;
      RecordedOutput& value = output(ref);
      value.read_by_backward = true;
      if (is_save(value.decision)) continue;
      if (!value.counted_dropped) {
        value.counted_dropped = true;
        ++recompute_stats().values_dropped;
        recompute_stats().bytes_dropped += int64_t(node.saved[k].value().nbytes());
      }
      ValueKey key = key_of(ref.index, ref.output);
      dropped_.emplace_back(r.node, key);
      // The closure owns the region: it lives while a dropped tensor may be read.
      node.saved[k].drop([self = shared_from_this(), key] { return self->take(key); });
    }
  }

  // The region as a cost model for the planner (before anything is dropped).
  RegionGraph graph() const {
    RegionGraph g;
    g.region = scope_;
    std::vector<int32_t> first_value(nodes_.size());  // node -> index of its output 0
    for (int32_t i = 0; i < int32_t(nodes_.size()); ++i) {
      const RecordedNode& r = nodes_[size_t(i)];
      RegionGraph::NodeInfo info{r.op->name, r.flops, {}, r.bytes_moved};
      for (const ValueRef& ref : r.inputs) {
        if (ref.kind == ValueRef::Kind::produced) {
          info.reads.push_back(first_value[size_t(ref.index)] + int32_t(ref.output));
        }
      }
      g.nodes.push_back(std::move(info));
      first_value[size_t(i)] = int32_t(g.values.size());
      for (uint32_t j = 0; j < r.outputs.size(); ++j) {
        g.values.push_back({i, j, r.outputs[j].bytes, r.outputs[j].read_by_backward});
      }
    }
    for (const SavedTensor& e : externals_) {
      if (e.holds_value() && e.value().storage()->kind() != MemoryKind::parameter) {
        g.input_bytes += int64_t(e.value().nbytes());
      }
    }
    return g;
  }

  // Innermost region first; a region recomputes when every policy abstains.
  Decision decide(const ValueInfo& info) {
    thread_local std::vector<std::optional<Decision>> votes;  // innermost first
    votes.clear();
    const auto& stack = region_stack();
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) votes.push_back((*it)->policy()(info));
    return resolve(votes).value_or(Decision::prefer_recompute);
  }

  ValueRef resolve_input(const Tensor& t) {
    if (!t.defined()) return {};
    if (std::optional<ValueRef> known = tensors_.find(t)) return *known;
    const ValueRef ref{ValueRef::Kind::external, int32_t(externals_.size()), 0};
    externals_.emplace_back(t);
    tensors_.set(t, ref);
    return ref;
  }

  // A dropped value, replaying the region when this backward has not yet.
  Tensor take(ValueKey key) {
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      replay();
      it = cache_.find(key);
    }
    Tensor value = it->second.first;
    if (--it->second.second == 0) cache_.erase(it);
    return value;
  }

  std::vector<std::optional<rng::Reservation>> replay_reservations() {
    std::vector<std::optional<rng::Reservation>> out(nodes_.size());
    if (options_.rng == RngReplay::recorded) {
      for (size_t i = 0; i < nodes_.size(); ++i) out[i] = nodes_[i].rng;
      return out;
    }
    rng::Generator& gen = generator();
    // Stream names by index, from now: streams are only ever appended, and
    // the stash may predate a stream's first use.
    const rng::GeneratorState now = gen.state();
    if (options_.rng == RngReplay::stash) gen.set_state(*stash_);
    // Reserve again in recording order, as re-running the region's code would.
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const auto& r = nodes_[i].rng;
      if (r) out[i] = gen.reserve(now.streams.at(r->stream).name, r->count);
    }
    if (options_.rng == RngReplay::stash) gen.set_state(now);
    return out;
  }

  void replay() {
    TraceSpan region_span("replay", scope_, "replay");
    ReplayTimer timer;
    RecomputeStats& stats = recompute_stats();
    ++stats.replays;
    std::vector<std::optional<rng::Reservation>> reservations = replay_reservations();
    std::unordered_map<ValueKey, std::pair<Tensor, int64_t>> live;  // values later replays read
    NoGradGuard no_grad;
    for (int32_t index : replay_order_) {
      RecordedNode& r = nodes_[size_t(index)];
      std::string where = std::string(r.op->name) + " at '" + *r.scope + "'";
      Tensors inputs;
      for (const ValueRef& ref : r.inputs) {
        if (ref.kind == ValueRef::Kind::none) {
          inputs.emplace_back();
        } else if (ref.kind == ValueRef::Kind::external) {
          inputs.push_back(externals_[size_t(ref.index)].unpack(where));
        } else if (const RecordedOutput& in = output(ref); is_save(in.decision)) {
          inputs.push_back(in.held.unpack(where));
        } else {
          inputs.push_back(live.at(key_of(ref.index, ref.output)).first);
        }
      }
      TraceSpan node_span(r.op->name, *r.scope);
      Tensors outputs;
      try {
        const CurrentOpGuard running(r.op->name, "replay", *r.scope);
        const auto& reservation = reservations[size_t(index)];
        outputs = r.forward(inputs, reservation ? &*reservation : nullptr);
      } catch (const OutOfMemoryError&) {
        throw;  // names the op and scope already, and callers catch it by type
      } catch (const Error& e) {
        REPRISE_FAIL("checkpoint region '", scope_, "': replaying ", where, ": ", e.what());
      }
      ++stats.nodes_replayed;
      for (uint32_t j = 0; j < outputs.size(); ++j) {
        if (options_.recompute_noise_ulps > 0 && glob_match(options_.noise_scopes, *r.scope)) {
          outputs[j] = perturb_ulps(outputs[j], options_.recompute_noise_ulps, options_.noise_seed,
                                    r.sequence_nr * 1031 + j);
        }
        if (options_.verify != Verify::none) verify(r, j, outputs[j]);
        const RecordedOutput& out = r.outputs[j];
        ValueKey key = key_of(index, j);
        if (out.dropped_slots > 0) cache_[key] = {outputs[j], out.dropped_slots};
        if (out.replay_readers > 0) live[key] = {outputs[j], out.replay_readers};
      }
      // Free intermediates whose last replay reader has run.
      for (const ValueRef& ref : r.inputs) {
        if (ref.kind != ValueRef::Kind::produced || is_save(output(ref).decision)) continue;
        auto it = live.find(key_of(ref.index, ref.output));
        if (it != live.end() && --it->second.second == 0) live.erase(it);
      }
    }
  }

  void verify(const RecordedNode& r, uint32_t output, const Tensor& replayed) {
    std::optional<Mismatch> m = r.outputs[output].fingerprint.compare(replayed, options_.verify);
    if (!m) return;
    m->region = scope_;
    m->scope = *r.scope;
    m->op = r.op->name;
    m->output = output;
    ++recompute_stats().mismatches;
    if (options_.on_mismatch == OnMismatch::raise) throw Error(m->describe());
    report_mismatch(std::move(*m));
  }

  std::string scope_;
  const Policy* policy_;  // while recording and at exit; nullptr after
  CheckpointOptions options_;
  std::optional<rng::GeneratorState> stash_;

  std::vector<RecordedNode> nodes_;
  std::vector<SavedTensor> externals_;                             // inputs from outside the region
  std::vector<std::pair<std::string_view, int64_t>> op_counts_;    // op name -> nodes so far
  std::vector<std::pair<std::weak_ptr<Node>, ValueKey>> dropped_;  // slots dropped while recording
  TensorIndex tensors_;  // while recording: which tensor is which value

  // After exit: the replay plan and the values it hands to backward.
  std::vector<int32_t> replay_order_;                               // node indices, recording order
  std::unordered_map<ValueKey, std::pair<Tensor, int64_t>> cache_;  // replayed, awaiting readers
};

// Keeps the region stack consistent when fn throws.
class ActiveRegion {
 public:
  explicit ActiveRegion(Region& r) : observe_(r) { region_stack().push_back(&r); }
  ~ActiveRegion() { region_stack().pop_back(); }
  ActiveRegion(const ActiveRegion&) = delete;
  ActiveRegion& operator=(const ActiveRegion&) = delete;

 private:
  ObserveTape observe_;
};

}  // namespace

const char* rng_replay_name(RngReplay mode) {
  switch (mode) {
    case RngReplay::recorded:
      return "recorded";
    case RngReplay::stash:
      return "stash";
    case RngReplay::fresh:
      return "fresh";
  }
  return "unknown";
}

CheckpointOptions& default_checkpoint_options() {
  thread_local CheckpointOptions options;
  return options;
}

RecomputeStats& recompute_stats() {
  thread_local RecomputeStats stats;
  return stats;
}

RecomputeStats operator-(const RecomputeStats& after, const RecomputeStats& before) {
  return {after.regions - before.regions,
          after.values_dropped - before.values_dropped,
          after.bytes_dropped - before.bytes_dropped,
          after.replays - before.replays,
          after.nodes_replayed - before.nodes_replayed,
          after.rng_bytes_stashed - before.rng_bytes_stashed,
          after.mismatches - before.mismatches,
          after.replay_seconds - before.replay_seconds};
}

Tensors checkpoint(const std::string& scope, const Policy& policy,
                   const std::function<Tensors()>& fn, const CheckpointOptions& options) {
  // Spans the recording and the region's exit, where dropped values are freed.
  TraceSpan span("checkpoint", scope);
  auto region = std::make_shared<Region>(scope, policy, options);
  Tensors outputs;
  try {
    Scope named(scope);
    ActiveRegion active(*region);
    region->enter();
    try {
      outputs = fn();
    } catch (const OutOfMemoryError&) {
      throw;  // names the op and scope already, and callers catch it by type
    } catch (const Error& e) {
      REPRISE_FAIL("checkpoint region '", *current_scope(), "': ", e.what());
    }
  } catch (...) {
    // What fn recorded before it threw may outlive the throw (a caller, or
    // a Python traceback, can hold its tensors): finish the region so that
    // their dropped values replay instead of dangling.
    region->finish(/*completed=*/false);
    throw;
  }
  region->finish();
  return outputs;
}

Tensors checkpoint(const std::string& scope, const Policy& policy,
                   const std::function<Tensors()>& fn) {
  return checkpoint(scope, policy, fn, default_checkpoint_options());
}

Tensor checkpoint(const std::string& scope, const Policy& policy, const std::function<Tensor()>& fn,
                  const CheckpointOptions& options) {
  auto one = [&] { return Tensors{fn()}; };
  return checkpoint(scope, policy, std::function<Tensors()>(one), options)[0];
}

Tensor checkpoint(const std::string& scope, const Policy& policy,
                  const std::function<Tensor()>& fn) {
  return checkpoint(scope, policy, fn, default_checkpoint_options());
}

Tensor checkpoint_sequential(const std::string& scope,
                             const std::vector<std::function<Tensor(const Tensor&)>>& stages,
                             int segments, const Tensor& x, const Policy& policy) {
  REPRISE_CHECK(segments >= 1 && size_t(segments) <= std::max<size_t>(stages.size(), 1),
                "checkpoint_sequential: ", segments, " segments for ", stages.size(), " stages");
  size_t per = (stages.size() + size_t(segments) - 1) / size_t(segments);
  Tensor h = x;
  Scope named(scope);
  for (size_t begin = 0; begin < stages.size(); begin += per) {
    size_t end = std::min(stages.size(), begin + per);
    h = checkpoint(std::to_string(begin), policy, [&] {
      Tensor y = h;
      for (size_t s = begin; s < end; ++s) y = stages[s](y);
      return y;
    });
  }
  return h;
}

}  // namespace reprise::autograd
