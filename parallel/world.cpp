#include "parallel/world.h"

#include <algorithm>
#include <cstdlib>

#include "parallel/single_process.h"

#if defined(REPRISE_HAS_MPI)
#include <mpi.h>

#include "parallel/mpi_communicator.h"
#endif

namespace reprise::parallel {
namespace {

// The number of processes a launcher says it started (0: no launcher).
int launched_processes() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* v = std::getenv(var)) return std::max(1, std::atoi(v));
  }
  return std::getenv("PMIX_RANK") != nullptr ? 1 : 0;
}

}  // namespace

World::World(double timeout_seconds) {
  REPRISE_CHECK(timeout_seconds > 0, "World: the timeout must be positive, got ", timeout_seconds);
  const int launched = launched_processes();
#if defined(REPRISE_HAS_MPI)
  if (launched > 0) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    REPRISE_CHECK(rc == MPI_SUCCESS, "MPI_Init_thread failed (error ", rc, ")");
    mpi_ = true;
    try {
      REPRISE_CHECK(provided >= MPI_THREAD_MULTIPLE,
                    "this MPI library does not provide MPI_THREAD_MULTIPLE (level ", provided,
                    "), which the gradient reducer's thread needs");
      comm_ = MpiCommunicator::world(timeout_seconds);
    } catch (...) {
      MPI_Finalize();
      throw;
    }
    return;
  }
#else
  REPRISE_CHECK(launched <= 1, "an MPI launcher started ", launched,
                " processes, but this build has no MPI (install libopenmpi-dev and rebuild)");
#endif
  comm_ = std::make_shared<SingleProcessCommunicator>();
}

World::~World() {
  comm_.reset();
#if defined(REPRISE_HAS_MPI)
  if (mpi_) MPI_Finalize();
#endif
}

void World::abort(int status) {
#if defined(REPRISE_HAS_MPI)
  if (mpi_ && comm_->size() > 1) MPI_Abort(MPI_COMM_WORLD, status);
#endif
  (void)status;
}

}  // namespace reprise::parallel
