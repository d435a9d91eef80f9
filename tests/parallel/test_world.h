#pragma once
// The parallel suite runs in one process (CTest label parallel) and under
// mpiexec on 2 ranks (label mpi); every test works at any rank count. Its
// main (main.cpp) holds the one parallel::World of the run.

#include "parallel/world.h"

namespace reprise::testing {

parallel::World& test_world();
// Its communicator, over every rank.
inline const std::shared_ptr<parallel::Communicator>& world() {
  return test_world().communicator();
}

}  // namespace reprise::testing
