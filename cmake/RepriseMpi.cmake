# Decides which communicators parallel/ builds. MPI (CPU tensors): when an
# MPI library is found (REPRISE_MPI=AUTO), or required (ON). NCCL (GPU
# tensors): with the CUDA backend, from the CUDA toolkit's NCCL.
set(REPRISE_MPI "AUTO" CACHE STRING "Build the MPI communicator: AUTO (when MPI is found), ON or OFF")
set_property(CACHE REPRISE_MPI PROPERTY STRINGS AUTO ON OFF)
set(REPRISE_HAS_MPI OFF)
if(REPRISE_MPI STREQUAL "ON" OR REPRISE_MPI STREQUAL "AUTO")
  if(REPRISE_MPI STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS CXX)
  else()
    find_package(MPI COMPONENTS CXX)
  endif()
  if(MPI_CXX_FOUND)
    set(REPRISE_HAS_MPI ON)
  endif()
endif()
message(STATUS "reprise: MPI communicator ${REPRISE_HAS_MPI}")

# How tests start 2 ranks: Open MPI needs --oversubscribe on a machine with
# fewer cores than ranks, and its mpirun refuses root unless told (CI runs
# as root).
# REPRISE_MPIEXEC is the launcher with its global flags (an MPMD line adds
# "-n 1 prog : -n 1 prog"), REPRISE_MPIEXEC_2 and _4 launches of 2 and 4
# ranks.
if(REPRISE_HAS_MPI)
  set(REPRISE_MPIEXEC ${MPIEXEC_EXECUTABLE})
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE mpiexec_version
                  ERROR_QUIET)
  if(mpiexec_version MATCHES "Open MPI|OpenRTE")
    list(APPEND REPRISE_MPIEXEC --oversubscribe)
  endif()
  set(REPRISE_MPIEXEC_2 ${REPRISE_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} 2 ${MPIEXEC_PREFLAGS})
  set(REPRISE_MPIEXEC_4 ${REPRISE_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} 4 ${MPIEXEC_PREFLAGS})
  set(REPRISE_MPIEXEC_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
endif()

set(REPRISE_HAS_NCCL OFF)
if(REPRISE_HAS_CUDA)
  find_path(REPRISE_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} NO_DEFAULT_PATH)
  find_library(REPRISE_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} NO_DEFAULT_PATH)
  if(NOT REPRISE_NCCL_INCLUDE_DIR OR NOT REPRISE_NCCL_LIBRARY)
    find_path(REPRISE_NCCL_INCLUDE_DIR nccl.h)
    find_library(REPRISE_NCCL_LIBRARY nccl)
  endif()
  if(REPRISE_NCCL_INCLUDE_DIR AND REPRISE_NCCL_LIBRARY)
    set(REPRISE_HAS_NCCL ON)
  endif()
endif()
message(STATUS "reprise: NCCL communicator ${REPRISE_HAS_NCCL}")
