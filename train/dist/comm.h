// The MPI world of a data-parallel run (issue 17). `mpirun -np N alpha train ...` starts N ranks; a process
// started without a launcher never calls MPI at all and is rank 0 of 1, so single-process runs are unchanged.
// Every collective here is deterministic: sums fold the ranks' values in rank order 0, 1, ..., N-1, so a run
// with N ranks reproduces its bits (MPI_Allreduce leaves the order to the implementation, so it is not used).
// Errors: MPI returns codes (MPI_ERRORS_RETURN) that become DistError; a collective that waits longer than the
// watchdog's timeout aborts the whole job; finish() ends a failed rank with MPI_Abort, which makes mpirun
// stop every other rank at once instead of leaving them blocked in a collective.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace alpha::dist {

class DistError : public Error {
  using Error::Error;
};

// True when this process was started by an MPI launcher (mpirun / PMIx sets its environment).
bool launched_by_mpi();

class World {
 public:
  // Initializes MPI (thread level MULTIPLE: the gradient reducer's thread runs collectives while the main
  // thread waits) when launched_by_mpi(); otherwise a world of one. Call once, from main.
  static void init(int* argc, char*** argv);
  // Ends the process's MPI part: MPI_Finalize on exit code 0, MPI_Abort(code) otherwise (so a failing rank
  // takes the job down within seconds). Returns `code` (only when it did not abort).
  static int finish(int code);

  static int rank();
  static int size();
  static int local_rank();  // rank among the processes on this host (picks the GPU)
  static bool active();     // MPI was initialized (size may still be 1: `mpirun -np 1`)

  // Collectives on MPI_COMM_WORLD (no-ops in a world of one). The timeout (ALPHA_DIST_TIMEOUT_S, default
  // 900 s) covers a rank that hangs without exiting; a rank that exits is handled by mpirun.
  static void barrier(const char* what);
  // Sums `v` over the ranks in rank order; every rank gets the same bits.
  static void sum_f64(std::vector<double>& v, const char* what);
  // Gathers `v` (same length on every rank) to every rank, rank-major: out[r * v.size() + i].
  static std::vector<double> allgather_f64(const std::vector<double>& v, const char* what);
  // Rank 0's bytes to every rank (`data` is resized on the others).
  static void broadcast(std::string& data, const char* what);
  // ZeRO-1 (optim.zero): an owner's floats to every rank, and point-to-point (a checkpoint's AdamW state to rank 0).
  static void broadcast_f32(float* data, int64_t n, int root, const char* what);
  static void send_f32(const float* data, int64_t n, int to, int tag, const char* what);
  static void recv_f32(float* data, int64_t n, int from, int tag, const char* what);
  // The abort-on-timeout guard around one blocking MPI call; nestable from any thread.
  class Watch {
   public:
    explicit Watch(const char* what);
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    uint64_t id_ = 0;
  };
};

// Sums a float buffer over the ranks in place, in rank order: reduce-scatter (each rank receives every rank's
// copy of its 1/N slice and folds them in rank order) then all-gather. Every rank ends with the same bits.
// Returns the bytes this rank sent.
int64_t allreduce_sum_f32(float* data, int64_t n, const char* what);

// Throws DistError "[dist] <what>: <MPI error text>" when rc is not MPI_SUCCESS.
void check_mpi(int rc, const char* what);

}  // namespace alpha::dist
