# Sourced by the test scripts: what this machine's CPU runs of the
# capabilities of engine/cpu_capability.h, from /proc/cpuinfo's flags.
#   cpu_best_build  the best of the builds of the kernels (scalar, avx2,
#                   avx512: cpu/CMakeLists.txt's REPRISE_CPU_LEVELS)
#   cpu_lower       the capabilities below the best one it has (the best
#                   may be avx512_bf16, which runs the avx512 build)
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
cpu_has() { for f in "$@"; do [[ $cpu_flags == *" $f "* ]] || return 1; done; }
cpu_best_build=scalar
cpu_lower=()
if cpu_has avx2 fma f16c bmi2; then
  cpu_best_build=avx2
  cpu_lower+=(scalar)
  if cpu_has avx512f avx512bw avx512dq avx512vl; then
    cpu_best_build=avx512
    cpu_lower+=(avx2)
    cpu_has avx512_bf16 && cpu_lower+=(avx512)
  fi
fi
