# Compiler settings shared by every reprise target, and the helper that
# declares one library per layer.

# Designated initializers leave defaulted fields out on purpose.
set(REPRISE_WARNINGS -Wall -Wextra -Wpedantic -Wno-unused-parameter -Wno-missing-field-initializers)
if(REPRISE_WERROR)
  list(APPEND REPRISE_WARNINGS -Werror)
endif()

if(REPRISE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

# Builds are tuned for the machine that builds them (-march=native in every
# configuration, so the sanitizer build runs the same SIMD code paths), and
# Release adds -O3. These flags stay private to reprise's own targets so that
# an embedding project keeps its own.
set(REPRISE_OPT_FLAGS -march=native $<$<CONFIG:Release>:-O3>)

# reprise_add_layer(<layer> SOURCES ... DEPENDS ...)
# Declares reprise_<layer> (alias reprise::<layer>); headers are included from
# the repository root as "<layer>/<file>.h".
function(reprise_add_layer layer)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPENDS" ${ARGN})
  set(target reprise_${layer})
  add_library(${target} ${ARG_SOURCES})
  add_library(reprise::${layer} ALIAS ${target})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:include/reprise>)
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${REPRISE_WARNINGS}> ${REPRISE_OPT_FLAGS})
  target_link_libraries(${target} PUBLIC ${ARG_DEPENDS})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${layer})
  set_property(GLOBAL APPEND PROPERTY REPRISE_LAYER_TARGETS ${target})
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/
    DESTINATION include/reprise/${layer}
    FILES_MATCHING PATTERN "*.h")
endfunction()

# reprise_private_flags(<target>): reprise's warnings and optimisation flags
# for a test, benchmark or example executable.
function(reprise_private_flags target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${REPRISE_WARNINGS}> ${REPRISE_OPT_FLAGS})
endfunction()

# REPRISE_BLAS: what computes each tile of the CPU GEMM (ops/gemm.cpp).
# OPENBLAS: OpenBLAS's sgemm/dgemm through Eigen's EIGEN_USE_BLAS forwarding,
# run single-threaded (the tiles are the parallelism, so OpenBLAS's threads
# never compete with OpenMP's). OFF: Eigen's own kernel. AUTO (default):
# OpenBLAS when it is installed, else Eigen. OpenBLAS is 1.05-1.3x faster
# than Eigen 3.4's kernel per core on the Llama shapes (bench/RESULTS.md).
set(REPRISE_BLAS "AUTO" CACHE STRING
  "BLAS under the CPU GEMM: AUTO (OpenBLAS when found), OPENBLAS or OFF (Eigen's kernel)")
set_property(CACHE REPRISE_BLAS PROPERTY STRINGS AUTO OPENBLAS OFF)
if(NOT REPRISE_BLAS MATCHES "^(AUTO|OPENBLAS|OFF)$")
  message(FATAL_ERROR "REPRISE_BLAS must be AUTO, OPENBLAS or OFF, got '${REPRISE_BLAS}'")
endif()
