#pragma once
// The processes of a run. Started by an MPI launcher (mpirun, mpiexec: it
// sets OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK), a program gets MPI's
// world, initialised with MPI_THREAD_MULTIPLE; started alone it gets a
// single-process communicator and MPI is never touched. The World finalises
// MPI when it goes, so it must outlive every communicator it handed out.

#include <memory>

#include "parallel/communicator.h"

namespace reprise::parallel {

class World {
 public:
  // Every wait for another rank lasts at most `timeout_seconds`. Raises when
  // a launcher started several processes but the build has no MPI, or when
  // MPI lacks MPI_THREAD_MULTIPLE.
  explicit World(double timeout_seconds);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // The world communicator: rank r of R.
  const std::shared_ptr<Communicator>& communicator() const { return comm_; }
  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }

  // Ends every process of the run at once with `status` (MPI_Abort), after
  // an error on this one, so that no other rank waits for it until its
  // timeout. Returns only in a single process.
  void abort(int status);

 private:
  bool mpi_ = false;
  std::shared_ptr<Communicator> comm_;
};

}  // namespace reprise::parallel
