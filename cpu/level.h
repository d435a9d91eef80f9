#pragma once
// The CPU capability a file of cpu/ is being built for. Every kernel source
// of cpu/ is compiled once per capability (cpu/CMakeLists.txt), with
// REPRISE_CPU_LEVEL_SCALAR, _AVX2 or _AVX512 defined, and wraps its code in
//
//   REPRISE_CPU_BEGIN   // namespace reprise::cpu::<level> { + the level's ISA
//   ...
//   REPRISE_CPU_END
//
// The ISA is switched on per function (GCC's target pragma, Clang's
// attribute push), not for the whole file: code that the file only includes
// (the standard library, engine/) stays baseline, so an inline function or
// template instantiation that every build emits is the same baseline code
// whichever copy the linker keeps. Only code inside the namespace of a
// level, which no other build has, uses its instructions. Nothing may be
// #included between REPRISE_CPU_BEGIN and REPRISE_CPU_END.

// _Pragma takes one string literal, so the ISA lists stay on one line each.
// clang-format off
#if defined(REPRISE_CPU_LEVEL_AVX512)
#define REPRISE_CPU_NS avx512
#define REPRISE_CPU_GCC_TARGET _Pragma("GCC target(\"avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt\")")
#define REPRISE_CPU_CLANG_TARGET _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt\"))), apply_to = function)")
#elif defined(REPRISE_CPU_LEVEL_AVX2)
#define REPRISE_CPU_NS avx2
#define REPRISE_CPU_GCC_TARGET _Pragma("GCC target(\"avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt\")")
#define REPRISE_CPU_CLANG_TARGET _Pragma("clang attribute push(__attribute__((target(\"avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt\"))), apply_to = function)")
#elif defined(REPRISE_CPU_LEVEL_SCALAR)
#define REPRISE_CPU_NS scalar
#else
#error "cpu/: compile with one of REPRISE_CPU_LEVEL_SCALAR, _AVX2 or _AVX512 defined"
#endif
// clang-format on

// REPRISE_CPU_TARGET_PUSH / _POP switch the level's ISA on and off (the
// scalar level has no switch: it is the baseline).
#if defined(REPRISE_CPU_LEVEL_SCALAR)
#define REPRISE_CPU_TARGET_PUSH
#define REPRISE_CPU_TARGET_POP
#elif defined(__clang__)
#define REPRISE_CPU_TARGET_PUSH REPRISE_CPU_CLANG_TARGET
#define REPRISE_CPU_TARGET_POP _Pragma("clang attribute pop")
#else
#define REPRISE_CPU_TARGET_PUSH _Pragma("GCC push_options") REPRISE_CPU_GCC_TARGET
#define REPRISE_CPU_TARGET_POP _Pragma("GCC pop_options")
#endif

#define REPRISE_CPU_BEGIN REPRISE_CPU_TARGET_PUSH namespace reprise::cpu::REPRISE_CPU_NS {
#define REPRISE_CPU_END \
  }                     \
  REPRISE_CPU_TARGET_POP

// For the small vector helpers of cpu/: always inlined. A call would pass
// vectors through memory, and with GCC 12 a call that returns a 512-bit
// vector struct under the target pragma came back wrong: sanitizer builds,
// which inline less, lost lanes of an attention mask.
#define REPRISE_CPU_INLINE inline __attribute__((always_inline))
// A lambda that passes vectors on to a functor, always inlined for the same
// reason: `[&](auto x) REPRISE_CPU_LAMBDA { return f(x); }`.
#define REPRISE_CPU_LAMBDA __attribute__((always_inline))
