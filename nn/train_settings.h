#pragma once
// The settings of a training run (nn::TrainConfig's own fields), one row
// each. A row is the one place a setting is declared: TrainConfig's member
// and its default, the check validate() makes, the JSON a training
// checkpoint stores, the resume difference, the trainers' flag and config
// file key (--grad-clip, grad-clip = 1.0), their usage text and the Python
// property all come from it. Adding a setting is a row plus the code that
// uses it.
//
// X(type, name, default, check, on_resume, if_absent, value, help):
//   type       int64_t, double, uint64_t or DType (a run dtype: f32 or bf16)
//   check      what validate() holds it to (train_setting namespace below)
//   on_resume  kept: a resumed run must give the same value;
//              may_change: it may differ (how the run computes, not what)
//   if_absent  a stored config without the field: refused, or defaulted
//              (the field is newer than some checkpoints)
//   value      what the flag takes in usage ("N", "X")
//   help       the usage text; the trainers add the default
//
// The model (LlamaConfig) and checkpointing (CheckpointConfig) are settings
// of their own types, stored whole under "model" and beside these fields.

#include <cstdint>
#include <limits>
#include <string>

#include "engine/dtype.h"
#include "io/json.h"

// clang-format off
#define REPRISE_TRAIN_SETTINGS(X)                                                                \
  X(int64_t, steps, 250, at_least(1), kept, refused, "N",                                        \
    "schedule length in optimizer steps")                                                        \
  X(int64_t, batch, 16, at_least(1), kept, refused, "N",                                         \
    "sequences per micro-batch and process")                                                     \
  X(int64_t, grad_accum, 1, at_least(1), kept, defaulted, "N",                                   \
    "micro-batches per step and process, gradients summed")                                      \
  X(int64_t, seq, 128, at_least(2), kept, refused, "N",                                          \
    "tokens per sequence, at most the model's max_position_embeddings")                          \
  X(double, lr, 3e-3, above(0), kept, refused, "X",                                              \
    "peak learning rate, after warmup")                                                          \
  X(double, min_lr, 3e-4, at_least(0), kept, refused, "X",                                       \
    "final learning rate of the cosine decay, at most lr")                                       \
  X(int64_t, warmup, 20, at_least(0), kept, refused, "N",                                        \
    "linear warmup steps; longer than the run: the whole run warms up")                          \
  X(double, weight_decay, 0.1, at_least(0), kept, refused, "X",                                  \
    "AdamW decoupled weight decay on projections and head")                                      \
  X(double, beta1, 0.9, fraction(), kept, refused, "X",                                          \
    "AdamW's first-moment decay, in [0, 1)")                                                     \
  X(double, beta2, 0.95, fraction(), kept, refused, "X",                                         \
    "AdamW's second-moment decay, in [0, 1)")                                                    \
  X(double, grad_clip, 1.0, at_least(0), kept, refused, "X",                                     \
    "clip the global gradient L2 norm to X; 0: off")                                             \
  X(uint64_t, seed, 1, any_value(), kept, refused, "N",                                          \
    "seed of the run's generator: init, data order, dropout")                                    \
  X(DType, dtype, DType::f32, run_dtype(), kept, defaulted, "D",                                 \
    "f32 | bf16: precision of the projections; bf16 multiplies bf16 copies of activations "      \
    "and weights, accumulating in f32, with f32 master weights and optimizer state")             \
  X(DType, attention_dtype, DType::f32, run_dtype(), kept, defaulted, "D",                       \
    "f32 | bf16: attention on f32 q, k, v (our kernel) or on bf16 copies (cuDNN's fused "        \
    "attention on a GPU)")
// clang-format on

namespace reprise::nn {

// Whether a resumed run may give a setting another value.
enum class OnResume { kept, may_change };
// How a stored config without the field reads.
enum class IfAbsent { refused, defaulted };

// The checks a row names. Each raises an Error "TrainConfig: <name> must
// be ..., got <value>".
namespace train_setting {

// A range of numbers; an open end excludes its bound.
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
};
constexpr Range at_least(double lo) { return {lo, Range{}.hi, false, false}; }
constexpr Range above(double lo) { return {lo, Range{}.hi, true, false}; }
constexpr Range fraction() { return {0, 1, false, true}; }  // [0, 1)
struct AnyValue {};
constexpr AnyValue any_value() { return {}; }
struct RunDType {};  // f32 or bf16 (run_dtype_named)
constexpr RunDType run_dtype() { return {}; }

void check(const char* name, int64_t value, const Range& range);
void check(const char* name, double value, const Range& range);  // also finite
inline void check(const char*, uint64_t, AnyValue) {}
void check(const char* name, DType value, RunDType);

}  // namespace train_setting

// A setting's value as a stored config holds it: a number, the seed as a
// decimal string (JSON integers here stop at int64), a dtype by name.
inline json::Value setting_json(int64_t v) { return v; }
inline json::Value setting_json(double v) { return v; }
inline json::Value setting_json(uint64_t v) { return std::to_string(v); }
inline json::Value setting_json(DType v) { return dtype_name(v); }

}  // namespace reprise::nn
