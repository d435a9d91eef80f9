// The trainers' log: the head (model, data, run, compute, the machine's
// peak), a line and a --metrics object per logged step, --rank-stats'
// lines per process, the summary, and the hint after running out of
// memory.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "autograd/checkpoint.h"
#include "engine/backend.h"
#include "engine/cpu_capability.h"
#include "engine/memory_stats.h"
#include "engine/threads.h"
#include "examples/common/train_session.h"

namespace reprise::train_cli {

namespace {

// "ETA 1h02m", "ETA 3m05s", "ETA 12s": the time `steps` more steps take at
// `seconds_per_step`.
std::string eta(int64_t steps, double seconds_per_step) {
  const int64_t s = int64_t(std::llround(double(steps) * seconds_per_step));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "ETA %lldh%02lldm", (long long)(s / 3600),
                  (long long)(s % 3600 / 60));
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "ETA %lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "ETA %llds", (long long)s);
  }
  return buf;
}

}  // namespace

// ---- the machine's peak ------------------------------------------------------

// cores x 2 FMA pipes x f32 lanes x 2 flops per FMA x clock, twice that for
// bf16 products on vdpbf16ps (two multiply-adds per lane). The clock is
// /proc/cpuinfo's "cpu MHz" of the first CPU; the lanes are 16 with
// AVX-512, 8 with AVX2. (Zen 4 issues 512-bit FMAs as two 256-bit halves, so
// there the true peak is half of this for AVX-512 code; the figure is the
// conventional one.)
Peak machine_peak(int cores, DType dtype) {
  std::ifstream in("/proc/cpuinfo");
  double mhz = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cpu MHz", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) mhz = std::atof(line.c_str() + colon + 1);
      break;
    }
  }
  // The lanes of the capability the kernels run at (a forced lower one
  // lowers the peak too).
  const CpuCapability capability = cpu_capability();
  const bool avx512 =
      capability == CpuCapability::avx512 || capability == CpuCapability::avx512_bf16;
  const int lanes = avx512 ? 16 : capability == CpuCapability::avx2 ? 8 : 4;
  Peak p;
  if (mhz <= 0) {
    p.how = "unknown (no clock in /proc/cpuinfo): MFU not shown";
    return p;
  }
  const bool dot = dtype == DType::bf16 && capability == CpuCapability::avx512_bf16;
  p.flops = double(cores) * 2 * lanes * 2 * mhz * 1e6 * (dot ? 2 : 1);
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%.0f GFLOP/s %s = %d cores x 2 FMA x %d lanes (%s) x 2%s x %.2f GHz",
                p.flops / 1e9, dot ? "bf16" : "f32", cores, lanes,
                avx512                              ? "AVX-512"
                : capability == CpuCapability::avx2 ? "AVX2"
                                                    : "SSE",
                dot ? " x 2 (vdpbf16ps)" : "", mhz / 1e3);
  p.how = buf;
  return p;
}

// A GPU's peak in the projections' dtype as its backend knows it
// (Backend::peak_flops).
Peak device_peak(Device device, DType dtype) {
  Peak p;
  p.flops = backend(device).peak_flops(dtype);
  char buf[120];
  if (p.flops > 0) {
    std::snprintf(buf, sizeof buf, "%.1f TFLOP/s %s (%s)", p.flops / 1e12, dtype_name(dtype),
                  to_string(device).c_str());
  } else {
    std::snprintf(buf, sizeof buf, "unknown for %s: MFU not shown", to_string(device).c_str());
  }
  p.how = buf;
  return p;
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
  return buf;
}

// What to try after running out of memory: a smaller batch, or
// checkpointed activations. Under REPRISE_MAX_MEMORY, the budget for the
// budget planner's policy (budget:BYTES) is measured, under the same cap:
// two steps of the session's config over the built-in corpus at budget 0,
// the planner's recording step (every region recomputes everything) and
// its plan of the least memory (each region holds its inputs, `least`
// bytes in all). A plan for budget B holds at most B - least bytes more,
// so B = cap - peak + least fits.
std::string out_of_memory_hint(const OutOfMemoryError& e, const nn::TrainConfig& session) {
  const std::string hint = "hint: lower --batch (" + std::to_string(session.batch) + " now)";
  const std::string checkpoint = ", or checkpoint activations (--checkpoint-policy full)";
  if (e.limit == 0) return hint + checkpoint;
  nn::TrainConfig c = session;
  c.checkpointing.set_policy("budget:0");
  c.steps = std::max<int64_t>(c.steps, 2);
  int64_t peak = 0, least = 0;
  try {
    nn::Trainer trainer(c, std::make_shared<const nn::TextDataset>(nn::TextDataset::builtin()),
                        nullptr, e.device);
    for (int step = 0; step < 2; ++step) peak = std::max(peak, trainer.step().peak_total);
    least = trainer.checkpointing().planner()->summary().planned_bytes;
  } catch (const OutOfMemoryError&) {
    return hint + "; even with every layer recomputed (--checkpoint-policy full) a step " +
           "needs more than REPRISE_MAX_MEMORY's " + mib(e.limit);
  } catch (const Error&) {
    return hint + checkpoint;  // the measurement did not run (a vocabulary under 256 bytes)
  }
  const int64_t budget = e.limit - peak + least;
  const std::string bytes = budget >= (int64_t(16) << 20) ? std::to_string(budget >> 20) + "M"
                                                          : std::to_string(budget >> 10) + "K";
  return hint + ", or --checkpoint-policy budget:" + bytes + " would fit under the cap (" +
         "measured: a step with every layer recomputed peaks at " + mib(peak) + " of " +
         mib(e.limit) + ")";
}

// One line per rank: its throughput, how much of its step went to the
// gradient reduction (`reduction` names it) and how much of that ran during
// backward, and with the optimizer split the all-gathers of parameters (and
// with the parameters split, the MiB they brought). The
// metrics get the same figures per rank, and rank 0's buckets of the last
// step (their sizes and times), the input of bench/parallel's projection.
void log_ranks(nn::TrainGroup& group, const RankWindow& w, int64_t tokens_per_rank,
               const char* reduction, const parallel::GradientBuckets::Timing& last, StepLog& log) {
  const double steps = double(w.steps);
  const std::vector<double> all = group.all_gather(
      {double(tokens_per_rank) / w.seconds, 1e3 * w.seconds / steps, 1e3 * w.comm / steps,
       1e3 * w.comm_in_backward / steps, 1e3 * w.wait_after_backward / steps,
       1e3 * w.gather / steps, double(w.gathered_bytes) / steps / double(1 << 20)});
  const bool split = group.shard_layout() != nullptr;
  json::Array ranks;
  for (size_t r = 0; r < all.size() / 7; ++r) {
    const double* v = &all[7 * r];
    char buf[300];
    const int n = std::snprintf(
        buf, sizeof buf,
        "         rank %zu: %7.0f tok/s | step %.1f ms | %s %.1f ms (%.0f%% of the step, %.0f%% of "
        "it during backward) | wait after backward %.1f ms",
        r, v[0], v[1], reduction, v[2], v[1] > 0 ? 100 * v[2] / v[1] : 0.0,
        v[2] > 0 ? 100 * v[3] / v[2] : 0.0, v[4]);
    if (split && n > 0 && size_t(n) < sizeof buf) {
      if (v[6] > 0) {
        std::snprintf(buf + n, sizeof buf - size_t(n), " | gathers %.1f MiB in %.1f ms", v[6],
                      v[5]);
      } else {
        std::snprintf(buf + n, sizeof buf - size_t(n), " | all-gather %.1f ms", v[5]);
      }
    }
    log.lines.push_back(buf);
    json::Value m = json::Object{};
    m.set("tokens_per_s", v[0]);
    m.set("step_ms", v[1]);
    m.set("all_reduce_ms", v[2]);
    m.set("all_reduce_during_backward_ms", v[3]);
    m.set("wait_after_backward_ms", v[4]);
    if (split) m.set("all_gather_ms", v[5]);
    if (v[6] > 0) m.set("gathered_mib", v[6]);
    ranks.push_back(std::move(m));
  }
  log.metrics.emplace_back("ranks", std::move(ranks));
  json::Array buckets;
  for (const parallel::GradientBuckets::BucketTiming& b : last.buckets) {
    json::Value m = json::Object{};
    m.set("bytes", b.bytes);
    m.set("ready_ms", 1e3 * b.ready);
    m.set("start_ms", 1e3 * b.start);
    m.set("end_ms", 1e3 * b.end);
    buckets.push_back(std::move(m));
  }
  json::Value step = json::Object{};
  step.set("backward_end_ms", 1e3 * last.backward_end);
  step.set("done_ms", 1e3 * last.done);
  step.set("buckets", std::move(buckets));
  log.metrics.emplace_back("last_step_buckets", std::move(step));
}

// The head of the log: the model, the data and, for the built-in corpus,
// its entropy rate.
void print_model_and_data(const Session& s) {
  const nn::TrainConfig& c = s.config();
  const nn::TextDataset& data = *s.data;
  std::printf("model    %s: %.2fM parameters%s, %.1f MFLOP per token per step\n",
              c.model.describe().c_str(), double(s.trainer->model().num_parameters()) / 1e6,
              s.o.expert_parallel ? " in each process" : "", s.flops_per_token / 1e6);
  if (s.tok.is_bytes()) {
    std::printf("data     %s: %zu bytes, %lld for training, %lld held out\n", data.name().c_str(),
                data.text().size(), (long long)data.train_size(), (long long)data.val_size());
  } else {
    std::printf("data     %s: %zu bytes -> %lld tokens (%s), %lld for training, %lld held out\n",
                data.name().c_str(), data.text().size(), (long long)data.num_tokens(),
                s.tok.describe().c_str(), (long long)data.train_size(), (long long)data.val_size());
  }
  if (s.o.data.empty() && s.tok.is_bytes()) {
    std::printf(
        "         entropy rate %.3f nats/byte (a model that cannot copy or add: %.3f); "
        "uniform %.3f\n",
        s.entropy.nats_per_byte, s.entropy.grammar_only_nats, s.entropy.uniform_nats);
  } else if (s.o.data.empty()) {
    std::printf(
        "         entropy rate %.3f nats/token, %.2f bytes per token (a model that cannot copy "
        "or "
        "add: %.3f); uniform %.3f\n",
        s.entropy_rate, double(data.text().size()) / double(data.num_tokens()), s.grammar_only_rate,
        std::log(double(s.tok.vocab_size())));
  }
}

// The rest of the head: the run, its processes, how it computes, the
// machine's peak and where a resumed run starts.
void print_run_and_compute(const Session& s) {
  const nn::TrainConfig& c = s.config();
  const nn::Trainer& trainer = *s.trainer;
  const int ranks = s.world->size();
  std::printf(
      "run      %lld steps of %lld x %lld tokens, AdamW lr %.3g -> %.3g (cosine, warmup %lld), "
      "wd %.3g, clip %.3g, dropout %.3g/%.3g, seed %llu\n",
      (long long)c.steps, (long long)trainer.global_batch(), (long long)c.seq, c.lr, c.min_lr,
      (long long)c.warmup, c.weight_decay, c.grad_clip, c.model.dropout, c.model.attention_dropout,
      (unsigned long long)c.seed);
  if (ranks * c.grad_accum > 1) {
    std::printf("parallel %d process(es) (%s) x %lld micro-batch(es) of %lld sequences", ranks,
                s.world->communicator()->kind().c_str(), (long long)c.grad_accum,
                (long long)c.batch);
    if (s.o.expert_parallel) {
      const int64_t held =
          s.group->expert_dispatch()->local_experts(c.model.moe->num_local_experts).count;
      std::printf(", %lld experts per process", (long long)held);
    }
    std::printf(", %zu gradient bucket(s) of up to %lld KiB", s.group->buckets().num_buckets(),
                (long long)s.o.bucket_kib);
    static constexpr const char* kSplit[] = {
        "", ", optimizer state split over the processes",
        ", gradients and optimizer state split over the processes",
        ", parameters, gradients and optimizer state split over the processes"};
    std::printf("%s", kSplit[size_t(s.group->shard_mode())]);
    std::printf("\n");
  }
  const nn::CheckpointConfig& ck = c.checkpointing;
  std::printf("compute  checkpoint %s, ", ck.policy_string().c_str());
  if (c.model.moe) std::printf("router %s, ", ck.save_router ? "saved" : "recomputed");
  std::printf("rng replay %s, verify %s, noise %d ulps, %d threads, cpu %s, device %s, dtype %s\n",
              autograd::rng_replay_name(ck.rng_replay), autograd::verify_name(ck.verify),
              ck.recompute_noise_ulps, threads::num_threads(), to_string(cpu_capability()),
              to_string(s.o.device).c_str(), dtype_name(c.dtype));
  if (c.attention_dtype != DType::f32)
    std::printf("         attention in %s\n", dtype_name(c.attention_dtype));
  if (c.dtype == DType::bf16 && s.o.device.is_cpu()) {
    if (cpu_capability() == CpuCapability::avx512_bf16) {
      std::printf("         bf16 products on the dot-product instruction (vdpbf16ps)\n");
    } else {
      std::printf(
          "         bf16 products emulated at %s (no AVX512-BF16 in use): the same bits at the "
          "f32 product's speed, half the dot-product instruction's\n",
          to_string(cpu_capability()));
    }
  }
  std::printf("peak     %s\n", s.peak.how.c_str());
  if (s.resumed) {
    std::printf("resumed  from %s at step %lld\n", s.o.resume.c_str(),
                (long long)trainer.steps_done());
  }
  std::fflush(stdout);
}

// The step's --metrics object.
json::Value step_metrics(const Session& s, const Window& w, const StepReport& r) {
  json::Value m = json::Object{};
  m.set("step", r.step.step);
  // JSON has no NaN nor infinity: a skipped step's are null.
  auto number = [](double x) { return std::isfinite(x) ? json::Value(x) : json::Value(); };
  m.set("loss", number(r.step.loss));
  m.set("lr", r.step.lr);
  m.set("grad_norm", number(r.step.grad_norm));
  m.set("tokens_per_s", r.tokens_per_s);
  if (s.peak.flops > 0) m.set("mfu", r.mfu);
  m.set("peak_saved_activation_bytes", w.peak_saved);
  m.set("peak_total_bytes", w.peak_total);
  if (r.val) m.set("val_loss", number(*r.val));
  const autograd::RecomputeStats& rs = autograd::recompute_stats();
  m.set("recompute_replays", rs.replays);
  m.set("recompute_seconds", rs.replay_seconds);
  m.set("recompute_mismatches", rs.mismatches);
  if (r.step.skipped) m.set("skipped", true);
  for (const auto& [key, value] : r.extra.metrics) m.set(key, value);
  if (r.gpu) m.set("device_peak_reserved_bytes", r.gpu->peak_reserved);
  return m;
}

// The step's progress line, and the lines the program adds under it.
void print_step(const Session& s, const Progress& p, const StepReport& r) {
  const nn::Trainer::StepStats& st = r.step;
  const nn::TrainConfig& c = s.config();
  std::printf("step %5lld/%lld | loss %.4f | lr %.2e | grad norm %6.3f | %7.0f tok/s",
              (long long)st.step, (long long)c.steps, st.loss, st.lr, st.grad_norm, r.tokens_per_s);
  if (s.peak.flops > 0) std::printf(" | MFU %4.1f%%", 100 * r.mfu);
  const int64_t session_end =
      s.o.stop_after > 0 ? std::min(c.steps, p.first_step - 1 + s.o.stop_after) : c.steps;
  if (session_end > st.step) {
    std::printf(" | %s", eta(session_end - st.step, p.seconds / double(p.steps)).c_str());
  }
  std::printf(" | saved act %s | mem %s", mib(p.window.peak_saved).c_str(),
              mib(p.window.peak_total).c_str());
  if (r.gpu) {
    std::printf(" | %s reserved %s", to_string(s.o.device).c_str(),
                mib(r.gpu->peak_reserved).c_str());
  }
  if (r.val) std::printf(" | val loss %.4f", *r.val);
  if (st.skipped) std::printf(" | skipped: not finite, no update");
  std::printf("%s\n", r.extra.columns.c_str());
  for (const std::string& line : r.extra.lines) std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// The last lines: the session's steps, losses, replays and skipped steps,
// and each memory kind's peak over the last step.
void print_summary(const Session& s, const Progress& p) {
  const Options& o = s.o;
  if (!o.trace.empty() && p.steps < trace_step(o.trace_step)) {
    std::printf("trace    none written: the session ran %lld steps, --trace-step is %lld\n",
                (long long)p.steps, (long long)trace_step(o.trace_step));
  }
  const autograd::RecomputeStats& r = autograd::recompute_stats();
  std::printf("done     %lld steps in %.1f s, last loss %.4f", (long long)p.steps, p.seconds,
              p.last_loss);
  if (p.last_val) std::printf(", val loss %.4f", *p.last_val);
  if (o.data.empty() && s.tok.is_bytes()) {
    std::printf(" (entropy rate %.3f)", s.entropy.nats_per_byte);
  } else if (o.data.empty()) {
    std::printf(" (entropy rate %.3f nats/token)", s.entropy_rate);
  }
  if (s.config().checkpointing.kind != nn::CheckpointConfig::Kind::none) {
    std::printf("; %lld region replays (%.1f s), %lld verifier mismatches", (long long)r.replays,
                r.replay_seconds, (long long)r.mismatches);
  }
  if (p.skipped > 0) {
    std::printf("; %lld step(s) skipped for a non-finite loss or gradient norm",
                (long long)p.skipped);
  }
  std::printf("\n");
  // Each kind's own peak over the last step (they need not coincide), and
  // that of everything together.
  const MemorySnapshot memory = memory_stats::snapshot(o.device);
  std::printf("memory   peaks of the last step:");
  for (size_t k = 0; k < kMemoryKindCount; ++k) {
    std::printf(" %s %s,", memory_kind_name(MemoryKind(k)), mib(memory.by_kind[k].peak).c_str());
  }
  std::printf(" all together %s\n", mib(memory.total.peak).c_str());
}

}  // namespace reprise::train_cli
