# Compiler settings shared by every reprise target, and the helper that
# declares one library per layer.

# Designated initializers leave defaulted fields out on purpose.
set(REPRISE_WARNINGS -Wall -Wextra -Wpedantic -Wno-unused-parameter -Wno-missing-field-initializers)
if(REPRISE_WERROR)
  list(APPEND REPRISE_WARNINGS -Werror)
endif()

# The sanitizers' reports need files and lines, which line tables (-g1)
# give; full debug info (-g) made the sanitizer builds a quarter slower to
# compile (cpu/elementwise.cpp at AVX-512 under ASan: 69 s against 52 s).
# They build at -O1 (the sanitizers' own advice for speed with reports):
# cpu/elementwise.cpp at the scalar level under ASan+UBSan took 210 s at
# -O2 and 140 s at -O1, and the CPU kernels are half of that build.
if(REPRISE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -g1 -O1)
  add_link_options(-fsanitize=address,undefined)
endif()

# ThreadSanitizer. The CPU thread pool is reprise's own (engine/threads.cpp,
# std::thread and atomics, which TSan understands); OpenMP only answers
# omp_get_max_threads and omp_in_parallel and vectorizes loops (omp simd),
# so libgomp starts no threads and needs no suppressions.
if(REPRISE_TSAN)
  if(REPRISE_SANITIZE)
    message(FATAL_ERROR "REPRISE_TSAN and REPRISE_SANITIZE cannot be combined: build them apart")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -g1 -O1)
  add_link_options(-fsanitize=thread)
endif()

# A build runs on any CPU of its architecture: the CPU backend carries its
# kernels once per capability and picks one at run time (cpu/level.h), so
# the default build needs no -march. REPRISE_NATIVE=ON adds -march=native
# for the machine that builds, for comparison (the kernels' bits do not
# change: they are defined as fixed sequences of IEEE operations). Nothing
# may be contracted into a fused multiply-add behind the code's back
# (-ffp-contract=off; the kernels spell their FMAs out), or the bits would
# depend on the compiler's choices per target. Release adds -O3. These flags
# stay private to reprise's own targets so that an embedding project keeps
# its own.
option(REPRISE_NATIVE "Tune the build for the CPU that builds it (-march=native)" OFF)
set(REPRISE_OPT_FLAGS -ffp-contract=off $<$<BOOL:${REPRISE_NATIVE}>:-march=native>
    $<$<CONFIG:Release>:-O3>)

# reprise_add_layer(<layer> [SOURCES ...] [DEPENDS ...])
# Declares reprise_<layer> (alias reprise::<layer>); headers are included from
# the repository root as "<layer>/<file>.h". A layer without sources is
# header-only (an interface library).
function(reprise_add_layer layer)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPENDS" ${ARGN})
  set(target reprise_${layer})
  if(ARG_SOURCES)
    add_library(${target} ${ARG_SOURCES})
    set(scope PUBLIC)
    # 8 files to a translation unit (CMake's unity build): they share most
    # of their headers. A helper in a file's anonymous namespace needs a
    # name of its own within the layer.
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:${REPRISE_WARNINGS}> ${REPRISE_OPT_FLAGS})
  else()
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
  endif()
  add_library(reprise::${layer} ALIAS ${target})
  target_include_directories(${target} ${scope}
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:include/reprise>)
  target_compile_features(${target} ${scope} cxx_std_20)
  target_link_libraries(${target} ${scope} ${ARG_DEPENDS})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${layer})
  set_property(GLOBAL APPEND PROPERTY REPRISE_LAYER_TARGETS ${target})
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/
    DESTINATION include/reprise/${layer}
    FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
endfunction()

# reprise_private_flags(<target>): reprise's warnings and optimisation flags
# for a test, benchmark or example executable.
function(reprise_private_flags target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${REPRISE_WARNINGS}> ${REPRISE_OPT_FLAGS})
endfunction()
