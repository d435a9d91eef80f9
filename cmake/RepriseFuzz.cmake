# REPRISE_FUZZ: libFuzzer targets for the readers of untrusted files
# (fuzz/*.cpp -> fuzz_<name>), run by scripts/fuzz.sh. libFuzzer comes with
# clang, so the option needs clang (Debian: clang and libclang-rt-dev, which
# scripts/setup.sh installs).
#
# Every reprise target in such a build gets libFuzzer's coverage
# instrumentation (so the fuzzer is guided by what the readers and the
# layers they call do) and ASan+UBSan, with UBSan's findings fatal: a
# fuzzer only notices what crashes.
option(REPRISE_FUZZ "Build the libFuzzer targets in fuzz/ (needs clang)" OFF)
if(REPRISE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "REPRISE_FUZZ needs clang for libFuzzer, got ${CMAKE_CXX_COMPILER_ID} "
                        "(configure with -DCMAKE_CXX_COMPILER=clang++)")
  endif()
  # At -O1 with line tables (-g1), as the GCC sanitizer builds: a report
  # names files and lines, and a file compiles in 12-15% less time than at
  # RelWithDebInfo's -O2 -g (cpu/copy.cpp: 30.1 s to 25.7 s).
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer -g1 -O1)
  add_link_options(-fsanitize=address,undefined)
  # The CPU kernels (cpu/CMakeLists.txt) at -O0: the readers hand them only
  # the few small tensors a fuzzed file describes, and at -O1 they were
  # half of this build (cpu/elementwise.cpp 100 s, against 15 s at -O0).
  set(REPRISE_CPU_KERNEL_FLAGS -O0)
  add_subdirectory(${PROJECT_SOURCE_DIR}/fuzz ${PROJECT_BINARY_DIR}/fuzz)
endif()
