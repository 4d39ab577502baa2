#include "dist/comm.h"

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace alpha::dist {

namespace {

using Clock = std::chrono::steady_clock;

struct State {
  bool active = false;
  int rank = 0, size = 1, local_rank = 0;
  double timeout_s = 900;
  // Watchdog: every blocking collective in flight, by id, with its deadline.
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, std::pair<Clock::time_point, const char*>> watches;
  uint64_t next_id = 0;
  bool stop = false;
  std::thread watchdog;
};

State& state() {
  static State s;
  return s;
}

void watchdog_loop() {
  State& s = state();
  std::unique_lock lock(s.mu);
  while (!s.stop) {
    s.cv.wait_for(lock, std::chrono::milliseconds(250));
    const auto now = Clock::now();
    for (const auto& [id, w] : s.watches) {
      if (now < w.first) continue;
      std::fprintf(stderr,
                   "error: [dist] rank %d: %s waited more than %.0f s for the other ranks (one is stuck or gone): "
                   "aborting the job (ALPHA_DIST_TIMEOUT_S sets the limit)\n",
                   s.rank, w.second, s.timeout_s);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 6);
      std::_Exit(6);  // MPI_Abort does not return; this is only a backstop
    }
  }
}

int env_int(const char* name, int fallback) {
  const char* e = std::getenv(name);
  return e && *e ? std::atoi(e) : fallback;
}

}  // namespace

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw DistError(fmt::format("[dist] rank {}: {} failed: {}", state().rank, what, std::string(text, len)));
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

void World::init(int* argc, char*** argv) {
  State& s = state();
  if (s.active || !launched_by_mpi()) return;
  int provided = 0;
  check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  s.active = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &s.rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &s.size), "MPI_Comm_size");
  if (provided < MPI_THREAD_MULTIPLE)
    throw DistError(fmt::format("[dist] this MPI library gives thread level {}, alpha needs MPI_THREAD_MULTIPLE",
                                provided));
  // The launcher's local rank, else a split of the world by shared memory (one communicator per host).
  s.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", -1);
  if (s.local_rank < 0) {
    MPI_Comm local;
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, s.rank, MPI_INFO_NULL, &local),
              "MPI_Comm_split_type");
    check_mpi(MPI_Comm_rank(local, &s.local_rank), "MPI_Comm_rank");
    MPI_Comm_free(&local);
  }
  if (const char* e = std::getenv("ALPHA_DIST_TIMEOUT_S"); e && *e) {
    char* end = nullptr;
    const double t = std::strtod(e, &end);
    if (*end != '\0' || !(t > 0))
      throw DistError(fmt::format("[dist] ALPHA_DIST_TIMEOUT_S \"{}\" is not a positive number of seconds", e));
    s.timeout_s = t;
  }
  s.watchdog = std::thread(watchdog_loop);
}

int World::finish(int code) {
  State& s = state();
  if (!s.active) return code;
  {
    std::lock_guard lock(s.mu);
    s.stop = true;
  }
  s.cv.notify_all();
  if (s.watchdog.joinable()) s.watchdog.join();
  std::fflush(stdout);
  std::fflush(stderr);
  if (code != 0 && s.size > 1) MPI_Abort(MPI_COMM_WORLD, code);  // the others may be blocked in a collective
  MPI_Finalize();
  s.active = false;
  return code;
}

int World::rank() { return state().rank; }
int World::size() { return state().size; }
int World::local_rank() { return state().local_rank; }
bool World::active() { return state().active; }

World::Watch::Watch(const char* what) {
  State& s = state();
  if (!s.active) return;
  std::lock_guard lock(s.mu);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.timeout_s));
  s.watches[id_ = s.next_id++] = {deadline, what};
}

World::Watch::~Watch() {
  State& s = state();
  if (!s.active) return;
  std::lock_guard lock(s.mu);
  s.watches.erase(id_);
}

void World::barrier(const char* what) {
  if (size() == 1) return;
  Watch w(what);
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), what);
}

std::vector<double> World::allgather_f64(const std::vector<double>& v, const char* what) {
  if (size() == 1) return v;
  std::vector<double> all(v.size() * static_cast<size_t>(size()));
  Watch w(what);
  check_mpi(MPI_Allgather(v.data(), static_cast<int>(v.size()), MPI_DOUBLE, all.data(), static_cast<int>(v.size()),
                          MPI_DOUBLE, MPI_COMM_WORLD),
            what);
  return all;
}

void World::sum_f64(std::vector<double>& v, const char* what) {
  if (size() == 1) return;
  const std::vector<double> all = allgather_f64(v, what);
  for (size_t i = 0; i < v.size(); ++i) {
    double acc = all[i];
    for (int r = 1; r < size(); ++r) acc += all[static_cast<size_t>(r) * v.size() + i];  // rank order
    v[i] = acc;
  }
}

void World::broadcast(std::string& data, const char* what) {
  if (size() == 1) return;
  Watch w(what);
  uint64_t n = data.size();
  check_mpi(MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD), what);
  data.resize(n);
  check_mpi(MPI_Bcast(data.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD), what);
}

namespace {
int count_of(int64_t n, const char* what) {
  if (n > std::numeric_limits<int>::max())
    throw DistError(fmt::format("[dist] {}: {} floats is too many for one message", what, n));
  return static_cast<int>(n);
}
}  // namespace

void World::broadcast_f32(float* data, int64_t n, int root, const char* what) {
  if (size() == 1 || n == 0) return;
  Watch w(what);
  check_mpi(MPI_Bcast(data, count_of(n, what), MPI_FLOAT, root, MPI_COMM_WORLD), what);
}

void World::send_f32(const float* data, int64_t n, int to, int tag, const char* what) {
  Watch w(what);
  check_mpi(MPI_Send(data, count_of(n, what), MPI_FLOAT, to, tag, MPI_COMM_WORLD), what);
}

void World::recv_f32(float* data, int64_t n, int from, int tag, const char* what) {
  Watch w(what);
  check_mpi(MPI_Recv(data, count_of(n, what), MPI_FLOAT, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), what);
}

int64_t allreduce_sum_f32(float* data, int64_t n, const char* what) {
  const int N = World::size();
  if (N == 1 || n == 0) return 0;
  if (n > std::numeric_limits<int>::max() / 2)
    throw DistError(fmt::format("[dist] {}: {} floats is too large for one all-reduce (split it)", what, n));
  // Slice r of the buffer: [start[r], start[r + 1]).
  std::vector<int> start(N + 1), count(N), rcount(N), rdispl(N);
  for (int r = 0; r <= N; ++r) start[r] = static_cast<int>(n * r / N);
  for (int r = 0; r < N; ++r) count[r] = start[r + 1] - start[r];
  const int me = World::rank(), mine = count[me];
  for (int r = 0; r < N; ++r) rcount[r] = mine, rdispl[r] = r * mine;
  std::vector<float> recv(static_cast<size_t>(mine) * N);
  World::Watch w(what);
  check_mpi(MPI_Alltoallv(data, count.data(), start.data(), MPI_FLOAT, recv.data(), rcount.data(), rdispl.data(),
                          MPI_FLOAT, MPI_COMM_WORLD),
            what);
  // Fold in rank order: ((x0 + x1) + x2) + ... the same adds a single process makes over its micro-steps.
  float* out = data + start[me];
  for (int i = 0; i < mine; ++i) out[i] = recv[i];
  for (int r = 1; r < N; ++r) {
    const float* src = recv.data() + static_cast<size_t>(r) * mine;
    for (int i = 0; i < mine; ++i) out[i] += src[i];
  }
  check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, count.data(), start.data(), MPI_FLOAT,
                           MPI_COMM_WORLD),
            what);
  return (static_cast<int64_t>(n - mine) + static_cast<int64_t>(mine) * (N - 1)) * 4;  // slices out, mine back out
}

}  // namespace alpha::dist
