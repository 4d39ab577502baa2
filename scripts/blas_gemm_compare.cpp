// Experiment (issue 18): sgemm GFLOP/s at GPT-2 small's B4 T256 shapes, OpenBLAS vs BLIS vs oneDNN (dnnl_sgemm),
// each threaded by the library and tiled over our own threads (one-thread calls, 2-D tiles as core/cpu/matmul.cpp
// does). The dlopened OpenBLAS picks its core itself (no fix_blas_core: set OPENBLAS_CORETYPE on a masked CPU model).
// All libraries are dlopened, so no headers are needed. Inputs are pseudo-random; each mode's C is checked against
// the first library's (max |diff| / max |C|) and against its own repeats (bitwise reproducibility).
// Build: g++ -O2 -std=c++20 -o blas_gemm_compare scripts/blas_gemm_compare.cpp -ldl -lpthread
// Run:   LD_LIBRARY_PATH=<dirs with libopenblas.so.0, libblis.so.4, libdnnl.so.2> ./blas_gemm_compare THREADS
//        (Debian 12: /usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/x86_64-linux-gnu; oneDNN from libdnnl-dev)
//        beside python3 scripts/torch_gemm_cpu.py THREADS (same shapes).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {
enum { RowMajor = 101, NoTrans = 111, Trans = 112 };
using sgemm_t = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
struct Lib {
  const char* name;
  sgemm_t gemm;
  void (*set_threads)(int);
  bool per_thread = false;  // OpenMP: nthreads-var is per thread, so each tile worker must set 1 itself
};
void (*g_blis_threads)(long) = nullptr;
// oneDNN's row-major C API (oneapi/dnnl/dnnl.h); dnnl_dim_t is int64_t, the status 0 is dnnl_success.
using dnnl_sgemm_t = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                             int64_t, float, float*, int64_t);
dnnl_sgemm_t g_dnnl_sgemm = nullptr;
void (*g_omp_threads)(int) = nullptr;
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
  if (void* h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL)) {
    // Debian's oneDNN is OpenMP-threaded: its thread count is libgomp's (the instance libdnnl already loaded).
    void* gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_LOCAL);
    g_omp_threads = reinterpret_cast<void (*)(int)>(dlsym(gomp, "omp_set_num_threads"));
    g_dnnl_sgemm = reinterpret_cast<dnnl_sgemm_t>(dlsym(h, "dnnl_sgemm"));
    auto isa = reinterpret_cast<int (*)()>(dlsym(h, "dnnl_get_effective_cpu_isa"));
    std::printf("dnnl isa 0x%x\n", isa ? isa() : -1);  // dnnl_cpu_isa_t, e.g. 0xe7 avx512_core_bf16
    libs.push_back({"dnnl",
                    [](int, int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                       int ldb, float beta, float* c, int ldc) {
                      if (int st = g_dnnl_sgemm(ta == Trans ? 'T' : 'N', tb == Trans ? 'T' : 'N', m, n, k, alpha, a,
                                                lda, b, ldb, beta, c, ldc)) {
                        std::fprintf(stderr, "dnnl_sgemm status %d\n", st);
                        std::exit(1);
                      }
                    },
                    [](int n) { g_omp_threads(n); }, true});
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
    std::vector<float> A(size_t(s.M) * s.K), B(size_t(s.K) * s.N), C(size_t(s.M) * s.N), ref, first;
    uint32_t seed = 12345;  // LCG in [-1, 1): constant inputs would hide a wrong transpose or leading dimension
    for (auto* v : {&A, &B})
      for (float& x : *v) x = float((seed = seed * 1664525u + 1013904223u) >> 8) / float(1 << 23) - 1.f;
    const int lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    std::printf("%-14s %6d x %6d x %6d", s.name, s.M, s.N, s.K);
    char checks[512] = "", *ck = checks;
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
              if (L.per_thread) L.set_threads(1);  // else a std::thread's OpenMP call forks a team of all cores
              const float* Ar = s.ta ? A.data() + r0 : A.data() + size_t(r0) * lda;
              const float* Bc = s.tb ? B.data() + size_t(c0) * ldb : B.data() + c0;
              L.gemm(RowMajor, s.ta ? Trans : NoTrans, s.tb ? Trans : NoTrans, m, n, s.K, 1.f, Ar, lda, Bc, ldb, 0.f,
                     C.data() + size_t(r0) * s.N + c0, s.N);
            });
          for (auto& t : ts) t.join();
        };
        std::fill(C.begin(), C.end(), NAN);  // a tile left unwritten shows as inf below
        run();  // warm-up
        first = C;
        bool same = true;
        std::vector<double> ms;
        for (int rep = 0; rep < 5; ++rep) {
          const double t0 = now();
          run();
          ms.push_back((now() - t0) * 1e3);
          same = same && std::memcmp(C.data(), first.data(), C.size() * sizeof(float)) == 0;
        }
        std::sort(ms.begin(), ms.end());
        std::printf("  %s/%s %7.1f", L.name, tiled ? "tiles" : "lib", 2.0 * s.M * s.N * s.K / (ms[2] * 1e-3) / 1e9);
        if (ref.empty()) ref = first;
        double diff = 0, mag = 0;
        for (size_t i = 0; i < C.size(); ++i) {
          const double d = std::fabs(double(first[i]) - ref[i]);
          diff = std::max(diff, std::isnan(d) ? INFINITY : d), mag = std::max(mag, std::fabs(double(ref[i])));
        }
        ck += std::snprintf(ck, checks + sizeof checks - ck, "  %s/%s %.1e%s", L.name, tiled ? "tiles" : "lib",
                            diff / mag, same ? "" : " NOT-REPRO");
      }
    }
    std::printf("  GFLOP/s\n%-38s%s  (max|C-C0|/max|C0|)\n", "", checks);
    std::fflush(stdout);
  }
}
