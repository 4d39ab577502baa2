#include <cstdio>

#include "cli/cli.h"
#include "dist/comm.h"

// Under mpirun every rank runs this; alone, World is a world of one and MPI is never touched.
// finish(): MPI_Finalize on success, MPI_Abort on a failure so no other rank is left waiting (issue 17).
int main(int argc, char** argv) {
  try {
    alpha::dist::World::init(&argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return alpha::dist::World::finish(alpha::run_cli(argc, argv));
}
