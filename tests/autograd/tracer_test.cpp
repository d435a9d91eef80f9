// The tracer: a traced forward and backward through a checkpointed region
// has forward, backward and replay spans with the ops' names and scopes,
// spans nest, memory samples agree with MemoryStats, and the JSON is
// Trace Event Format.
#include "autograd/tracer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "autograd/backward.h"
#include "autograd/checkpoint.h"
#include "autograd/scope.h"
#include "ops/binary.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "tests/support/gradcheck.h"

namespace reprise::autograd {
namespace {

using testing::uniform;

bool has_span(const Tracer& t, const std::string& name, const std::string& scope,
              const std::string& category) {
  return std::any_of(t.spans().begin(), t.spans().end(), [&](const Tracer::Span& s) {
    return s.name == name && s.scope == scope && s.category == category;
  });
}

const Tracer::Span& only_span(const Tracer& t, const std::string& name) {
  auto it = std::find_if(t.spans().begin(), t.spans().end(),
                         [&](const Tracer::Span& s) { return s.name == name; });
  if (it == t.spans().end()) throw std::runtime_error("no span " + name);
  EXPECT_EQ(std::count_if(t.spans().begin(), t.spans().end(),
                          [&](const Tracer::Span& s) { return s.name == name; }),
            1)
      << name;
  return *it;
}

int64_t saved(const Tracer::MemorySample& m) {
  return m.live[size_t(MemoryKind::saved_activation)];
}

// loss = mean(tanh(x * w) * silu(x)) under Scope("model"), the product
// in a region "block" that keeps only its inputs (or, unless
// `checkpointed`, a plain Scope "block").
struct Traced {
  Tracer tracer;
  MemorySnapshot before, after;

  explicit Traced(bool checkpointed = true) {
    Tensor x = uniform({64, 32}, -1, 1, 1, DType::f32);  // data: saved as an activation
    Tensor w = uniform({32}, -1, 1, 2, DType::f32).requires_grad(true);
    auto block = [&] { return ops::mul(ops::tanh(ops::mul(x, w)), ops::silu(ops::mul(x, w))); };
    before = memory_stats::snapshot();
    {
      TraceGuard on(tracer);
      {
        Scope model("model");
        Tensor h;
        if (checkpointed) {
          h = checkpoint("block", policies::full(), block);
        } else {
          Scope plain("block");
          h = block();
        }
        backward(ops::mean(h));
      }
      tracer.sample_memory();
      after = memory_stats::snapshot();
    }
  }
};

TEST(Tracer, ForwardBackwardAndReplaySpansNameOpsAndScopes) {
  Traced run;
  const Tracer& t = run.tracer;
  // The region's ops ran three times: recorded, replayed for backward, and
  // their backward rules.
  for (const char* op : {"mul", "tanh", "silu"}) {
    EXPECT_TRUE(has_span(t, op, "model.block", "forward")) << op;
    EXPECT_TRUE(has_span(t, op, "model.block", "replay")) << op;
    EXPECT_TRUE(has_span(t, op, "model.block", "backward")) << op;
  }
  EXPECT_TRUE(has_span(t, "mean", "model", "forward"));
  EXPECT_TRUE(has_span(t, "mean", "model", "backward"));
  EXPECT_TRUE(has_span(t, "checkpoint", "block", "forward"));
  EXPECT_TRUE(has_span(t, "replay", "block", "replay"));

  // Spans nest: the region holds its recorded ops, and the one replay runs
  // inside the backward rule that first read a dropped value.
  const Tracer::Span& region = only_span(t, "checkpoint");
  const Tracer::Span& replay = only_span(t, "replay");
  auto inside = [](const Tracer::Span& child, const Tracer::Span& parent) {
    return child.start_us >= parent.start_us &&
           child.start_us + child.duration_us <= parent.start_us + parent.duration_us;
  };
  for (const Tracer::Span& s : t.spans()) {
    if (s.scope == "model.block" && std::string(s.category) == "forward") {
      EXPECT_TRUE(inside(s, region)) << s.name;
    }
    if (std::string(s.category) == "replay" && &s != &replay) {
      EXPECT_TRUE(inside(s, replay)) << s.name;
    }
  }
  EXPECT_TRUE(std::any_of(t.spans().begin(), t.spans().end(), [&](const Tracer::Span& s) {
    return std::string(s.category) == "backward" && inside(replay, s);
  }));
}

TEST(Tracer, MemorySamplesAgreeWithMemoryStats) {
  Traced run;
  const std::vector<Tracer::MemorySample>& m = run.tracer.memory();
  // One sample from the guard, one per span, and the test's last one.
  ASSERT_EQ(m.size(), run.tracer.spans().size() + 2);
  for (size_t i = 0; i < kMemoryKindCount; ++i) {
    EXPECT_EQ(m.front().live[i], run.before.by_kind[i].live) << memory_kind_name(MemoryKind(i));
    EXPECT_EQ(m.back().live[i], run.after.by_kind[i].live) << memory_kind_name(MemoryKind(i));
  }
  for (size_t i = 1; i < m.size(); ++i) {
    EXPECT_GE(m[i].time_us, m[i - 1].time_us);
    for (int64_t bytes : m[i].live) EXPECT_GE(bytes, 0);
  }
  // Backward frees everything the step saved, and the region saves less at
  // its peak than the same ops without it: the samples see the policy.
  auto peak_saved = [](const Tracer& t) {
    int64_t peak = 0;
    for (const Tracer::MemorySample& s : t.memory()) peak = std::max(peak, saved(s));
    return peak;
  };
  EXPECT_EQ(saved(m.back()), saved(m.front()));
  const Traced plain(/*checkpointed=*/false);
  EXPECT_FALSE(has_span(plain.tracer, "replay", "block", "replay"));
  EXPECT_GT(peak_saved(run.tracer), saved(m.front()));
  EXPECT_LT(peak_saved(run.tracer), peak_saved(plain.tracer));
}

TEST(Tracer, JsonIsTraceEventFormat) {
  Traced run;
  const json::Value doc = json::parse(json::dump(run.tracer.to_json("tracer_test")));
  size_t complete = 0, counters = 0, metadata = 0;
  for (const json::Value& e : doc.at("traceEvents").as_array()) {
    const std::string& ph = e.at("ph").as_string();
    if (ph == "X") {
      ++complete;
      EXPECT_GE(e.at("ts").as_double(), 0);
      EXPECT_GE(e.at("dur").as_double(), 0);
      EXPECT_TRUE(e.at("args").at("scope").is_string());
    } else if (ph == "C") {
      ++counters;
      EXPECT_GE(e.at("ts").as_double(), 0);
      EXPECT_EQ(e.at("args").as_object().size(), kMemoryKindCount);
    } else {
      EXPECT_EQ(ph, "M");
      ++metadata;
    }
  }
  EXPECT_EQ(complete, run.tracer.spans().size());
  EXPECT_EQ(counters, run.tracer.memory().size());
  EXPECT_EQ(metadata, 2u);
}

TEST(Tracer, OffWithoutAGuard) {
  Tracer tracer;
  { TraceGuard on(tracer); }
  Tensor x = uniform({8}, -1, 1, 1, DType::f32).requires_grad(true);
  backward(ops::mean(ops::tanh(x)));
  EXPECT_TRUE(tracer.spans().empty());
  EXPECT_EQ(active_tracer(), nullptr);
}

}  // namespace
}  // namespace reprise::autograd
