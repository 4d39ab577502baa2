// Experiment (issue 18): sgemm GFLOP/s at GPT-2 small's B4 T256 shapes, OpenBLAS vs BLIS, each threaded by the
// library and tiled over our own threads (one-thread calls, 2-D tiles as core/cpu/matmul.cpp does). The dlopened
// OpenBLAS picks its core itself (no fix_blas_core: set OPENBLAS_CORETYPE on a masked CPU model).
// Build: g++ -O2 -std=c++20 -o blas_gemm_compare scripts/blas_gemm_compare.cpp -ldl -lpthread
// Run:   LD_LIBRARY_PATH=<dir with libopenblas.so.0, libblis.so.4> ./blas_gemm_compare THREADS
//        beside python3 scripts/torch_gemm_cpu.py THREADS (same shapes).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {
enum { RowMajor = 101, NoTrans = 111, Trans = 112 };
using sgemm_t = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
struct Lib {
  const char* name;
  sgemm_t gemm;
  void (*set_threads)(int);
};
void (*g_blis_threads)(long) = nullptr;
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 16;
  std::vector<Lib> libs;
  if (void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL)) {
    auto core = reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_corename"));
    std::printf("openblas core %s\n", core ? core() : "?");
    libs.push_back({"openblas", reinterpret_cast<sgemm_t>(dlsym(h, "cblas_sgemm")),
                    reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"))});
  }
  if (void* h = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL)) {
    auto id = reinterpret_cast<int (*)()>(dlsym(h, "bli_arch_query_id"));
    auto str = reinterpret_cast<const char* (*)(int)>(dlsym(h, "bli_arch_string"));
    std::printf("blis arch %s\n", str(id()));
    g_blis_threads = reinterpret_cast<void (*)(long)>(dlsym(h, "bli_thread_set_num_threads"));
    libs.push_back({"blis", reinterpret_cast<sgemm_t>(dlsym(h, "cblas_sgemm")), [](int n) { g_blis_threads(n); }});
  }
  struct Shape {
    const char* name;
    int M, N, K;
    bool ta, tb;
  };
  const Shape shapes[] = {{"qkv x@W^T", 1024, 2304, 768, 0, 1},    {"proj x@W^T", 1024, 768, 768, 0, 1},
                          {"fc x@W^T", 1024, 3072, 768, 0, 1},     {"fcproj x@W^T", 1024, 768, 3072, 0, 1},
                          {"head x@W^T", 1024, 50257, 768, 0, 1},  {"fc dX dY@W", 1024, 768, 3072, 0, 0},
                          {"fcproj dX", 1024, 3072, 768, 0, 0},    {"head dX", 1024, 768, 50257, 0, 0},
                          {"fc dW dY^T@X", 3072, 768, 1024, 1, 0}, {"head dW", 50257, 768, 1024, 1, 0},
                          {"recipe x@W^T", 16384, 1536, 384, 0, 1}, {"recipe dW", 1536, 384, 16384, 1, 0}};
  for (const Shape& s : shapes) {
    std::vector<float> A(size_t(s.M) * s.K, 0.01f), B(size_t(s.K) * s.N, 0.02f), C(size_t(s.M) * s.N);
    const int lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    std::printf("%-14s %6d x %6d x %6d", s.name, s.M, s.N, s.K);
    for (const Lib& L : libs) {
      for (int tiled = 0; tiled < 2; ++tiled) {
        auto run = [&] {
          if (!tiled) {
            L.set_threads(threads);
            L.gemm(RowMajor, s.ta ? Trans : NoTrans, s.tb ? Trans : NoTrans, s.M, s.N, s.K, 1.f, A.data(), lda,
                   B.data(), ldb, 0.f, C.data(), s.N);
            return;
          }
          L.set_threads(1);
          int tr = 1, best = 1 << 30;  // the split minimising a tile's rows + columns
          for (int r = 1; r <= threads; ++r)
            if (threads % r == 0 && (s.M + r - 1) / r + (s.N + threads / r - 1) / (threads / r) < best)
              best = (s.M + r - 1) / r + (s.N + threads / r - 1) / (threads / r), tr = r;
          const int tc = threads / tr, rows = (s.M + tr - 1) / tr, cols = (s.N + tc - 1) / tc;
          std::vector<std::thread> ts;
          for (int i = 0; i < threads; ++i)
            ts.emplace_back([&, i] {
              const int r0 = (i / tc) * rows, c0 = (i % tc) * cols;
              if (r0 >= s.M || c0 >= s.N) return;
              const int m = std::min(s.M, r0 + rows) - r0, n = std::min(s.N, c0 + cols) - c0;
              const float* Ar = s.ta ? A.data() + r0 : A.data() + size_t(r0) * lda;
              const float* Bc = s.tb ? B.data() + size_t(c0) * ldb : B.data() + c0;
              L.gemm(RowMajor, s.ta ? Trans : NoTrans, s.tb ? Trans : NoTrans, m, n, s.K, 1.f, Ar, lda, Bc, ldb, 0.f,
                     C.data() + size_t(r0) * s.N + c0, s.N);
            });
          for (auto& t : ts) t.join();
        };
        run();  // warm-up
        std::vector<double> ms;
        for (int rep = 0; rep < 5; ++rep) {
          const double t0 = now();
          run();
          ms.push_back((now() - t0) * 1e3);
        }
        std::sort(ms.begin(), ms.end());
        std::printf("  %s/%s %7.1f", L.name, tiled ? "tiles" : "lib", 2.0 * s.M * s.N * s.K / (ms[2] * 1e-3) / 1e9);
      }
    }
    std::printf("  GFLOP/s\n");
    std::fflush(stdout);
  }
}
