// The parallel suite's main: one parallel::World for the whole run (MPI
// under mpiexec, else one process), created before the tests and finalised
// after them. Every rank runs every test; mpiexec fails when any rank does.
#include <gtest/gtest.h>

#include "tests/parallel/test_world.h"

namespace reprise::testing {
namespace {
parallel::World* g_world = nullptr;
}  // namespace

parallel::World& test_world() { return *g_world; }

}  // namespace reprise::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Generous: a loaded CI machine may stall a rank for seconds; the tests
  // of timeouts use their own, short ones.
  reprise::parallel::World world(120);
  reprise::testing::g_world = &world;
  const int status = RUN_ALL_TESTS();
  reprise::testing::g_world = nullptr;
  return status;
}
