# Decides whether the CUDA backend is built. AUTO builds it when nvcc is found.
set(REPRISE_HAS_CUDA OFF)
if(REPRISE_CUDA STREQUAL "ON" OR REPRISE_CUDA STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Hopper (H100/H200) and Ampere; override with -DCMAKE_CUDA_ARCHITECTURES.
    # Set before enable_language, which otherwise sets nvcc's own default
    # (sm_75 for CUDA 13), leaving Hopper to JIT-compile PTX.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(REPRISE_HAS_CUDA ON)
    # C++20: CMake 3.25 knows no dialect flags for nvcc 13, so it is told.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION -std=c++20)
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION -std=c++20)
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # reprise links the shared runtime (CUDA::cudart); a static copy in the
    # same program would be a second runtime with its own state.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    # Device code computes each element with the same roundings as the CPU
    # (engine/functors.h): no contraction of a * b + c into an FMA
    # (--fmad=false), IEEE division and square root (nvcc's defaults, never
    # --use_fast_math). The host side of .cu files gets the C++ flags'
    # -ffp-contract=off and warnings; nvcc's own warnings are errors with
    # REPRISE_WERROR. constexpr std:: functions are usable in device code.
    set(REPRISE_CUDA_FLAGS --fmad=false --expt-relaxed-constexpr
        -Xcompiler=-ffp-contract=off,-Wall,-Wextra,-Wno-unused-parameter,-Wno-missing-field-initializers)
    if(REPRISE_WERROR)
      list(APPEND REPRISE_CUDA_FLAGS -Xcompiler=-Werror --Werror=all-warnings)
    endif()
  elseif(REPRISE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "REPRISE_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
endif()
message(STATUS "reprise: CUDA backend ${REPRISE_HAS_CUDA}")
