// Batched matmul on oneDNN's sgemm (f32; ALPHA_CPU_GEMM=openblas takes OpenBLAS's) and OpenBLAS's dgemm (f64).
// Legend: M rows of the result, N columns, K the contracted dim. Each GEMM call runs on one thread; we split C into
// tiles across our own pool, so results never depend on timing.
#include "core/cpu/matmul.h"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "core/error.h"
#include "core/parallel.h"

// OpenBLAS's DYNAMIC_ARCH dispatch (Debian's build): weak, so a single-arch OpenBLAS links too.
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));

namespace alpha::cpu {

namespace {

// OpenBLAS 0.3.21 picks its kernels from the CPU model number; on a CPU it does not know (e.g. a VM's masked
// "Intel Xeon Processor") it falls back to Prescott's SSE3 kernels, 5x slower than its AVX-512 ones on the
// GPU machine. Where that happened and the CPU has the instructions, re-run its dispatch with the right core,
// unless the user chose one (OPENBLAS_CORETYPE).
void fix_blas_core() {
#if defined(__x86_64__)
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || std::getenv("OPENBLAS_CORETYPE")) return;
  const std::string core = openblas_get_corename();
  static const char* const kWeak[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai"};
  if (std::find(std::begin(kWeak), std::end(kWeak), core) == std::end(kWeak)) return;
  __builtin_cpu_init();
  const char* want = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    want = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    want = "Haswell";
  if (!want) return;
  setenv("OPENBLAS_CORETYPE", want, 0);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
#endif
}

// f32 GEMMs on oneDNN unless ALPHA_CPU_GEMM=openblas. On the GPU machine's 16-core Xeon, one-thread dnnl_sgemm
// tiles ran GPT-2's shapes at 550-1660 GFLOP/s against OpenBLAS 0.3.21's 200-1200 (scripts/blas_gemm_compare.cpp,
// docs/PERFORMANCE.md): OpenBLAS packs both operands in every tile's call.
bool use_onednn() {
  static const bool on = [] {
    const char* e = std::getenv("ALPHA_CPU_GEMM");
    if (!e || !*e || std::strcmp(e, "onednn") == 0) return true;
    if (std::strcmp(e, "openblas") == 0) return false;
    throw ValueError(fmt::format("[core] ALPHA_CPU_GEMM='{}' is not one of onednn, openblas", e));
  }();
  return on;
}

}  // namespace

void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
           int64_t ldb, float* C, int64_t ldc) {
  if (use_onednn()) {
    // Debian's oneDNN threads with OpenMP, whose thread count is per calling thread: one here, on every pool
    // thread, so a tile's call never starts a team of its own beside the pool.
    thread_local const bool one_thread = (omp_set_num_threads(1), true);
    (void)one_thread;
    const dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, 0.0f, C, ldc);
    ALPHA_CHECK(st == dnnl_success, Error, "[core] oneDNN sgemm failed (status {})", int(st));
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
              alpha, A, (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
}

void blas_setup() {
  static const bool done = [] {
    fix_blas_core();
    use_onednn();  // a bad ALPHA_CPU_GEMM throws here, on the calling thread, not inside a pool task
    openblas_set_num_threads(1);  // our pool does the threading; OpenBLAS's own workers would compete
    return true;
  }();
  (void)done;
}

namespace {

// One operand matrix inside a batch: pointer stride per batch and a BLAS description (row-major).
struct MatDesc {
  bool trans;   // BLAS transpose flag after folding in the view's layout
  int64_t ld;   // leading dimension
};

// A (rows, cols) matrix view with strides (rs, cs) is BLAS-usable if one stride is 1.
bool describe(int64_t rs, int64_t cs, int64_t rows, int64_t cols, bool want_trans, MatDesc& d) {
  if (cs == 1 && (rs >= std::max<int64_t>(cols, 1) || rows == 1)) {
    d = {want_trans, rows == 1 ? std::max<int64_t>(cols, 1) : rs};
    return true;
  }
  if (rs == 1 && (cs >= std::max<int64_t>(rows, 1) || cols == 1)) {
    d = {!want_trans, cols == 1 ? std::max<int64_t>(rows, 1) : cs};
    return true;
  }
  return false;
}

template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb,
          T* C, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, C, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                1.0, A, (int)lda, B, (int)ldb, 0.0, C, (int)ldc);
  }
}

// Rows per task when one GEMM is split by rows: one equal block per thread (GEMM blocks balance well, and
// fewer, larger calls keep OpenBLAS efficient), but never blocks under ~64K multiply-adds.
int64_t row_grain(int64_t rows, int64_t N, int64_t K) {
  const int64_t min_rows = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, N * K));
  const int64_t per_thread = (rows + num_threads() - 1) / num_threads();
  return std::max(min_rows, per_thread);
}

// C's tiles for a 2-D split: tr row blocks x tc column blocks, tr * tc = tasks. Each task packs its A rows and
// its B columns (OpenBLAS copies both per call), so the split minimises a task's rows + columns: split by rows
// alone, each of 16 threads packed all of B (9.4 MB at GPT-2's 768 x 3072). GPU machine, 16 threads: GPT-2
// fwd+bwd 1527 -> 1256 ms, CPU recipe step 20.6 -> 17.0 ms (docs/PERFORMANCE.md).
struct Tiles {
  int64_t tr, tc;
};
Tiles choose_tiles(int64_t M, int64_t N, int64_t tasks) {
  Tiles best{tasks, 1};
  int64_t best_cost = -1;
  for (int64_t tr = 1; tr <= tasks; ++tr) {
    if (tasks % tr) continue;
    const int64_t tc = tasks / tr;
    if (tr > M || tc > N) continue;
    const int64_t cost = (M + tr - 1) / tr + (N + tc - 1) / tc;
    if (best_cost < 0 || cost < best_cost) best = {tr, tc}, best_cost = cost;
  }
  return best;
}

// ALPHA_GEMM_SPLIT=rows (the split before the 2-D tiles: rows, or columns for wide C), =blas (OpenBLAS's own
// threads per large GEMM), else the 2-D tiles. For comparing them in benchmarks.
int gemm_split_mode() {
  static const int mode = [] {
    const char* e = std::getenv("ALPHA_GEMM_SPLIT");
    return e && std::strcmp(e, "rows") == 0 ? 1 : e && std::strcmp(e, "blas") == 0 ? 2 : 0;
  }();
  return mode;
}

// One M x N GEMM over the pool, C (M, N) row-major. Work below ~64K multiply-adds a task uses fewer tasks.
template <class T>
void split_gemm(const MatDesc& da, const MatDesc& db, int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C) {
  const int64_t threads = num_threads();
  const int mode = gemm_split_mode();
  if (mode == 2 && threads > 1 && M * N * K >= (int64_t{1} << 20)) {
    openblas_set_num_threads(static_cast<int>(threads));
    gemm<T>(da.trans, db.trans, M, N, K, A, da.ld, B, db.ld, C, N);
    openblas_set_num_threads(1);  // attention's per-(b, h) GEMMs run inside the pool
    return;
  }
  auto tile = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const T* Ar = da.trans ? A + r0 : A + r0 * da.ld;  // row r0 of op(A)
    const T* Bc = db.trans ? B + c0 * db.ld : B + c0;  // column c0 of op(B)
    gemm<T>(da.trans, db.trans, r1 - r0, c1 - c0, K, Ar, da.ld, Bc, db.ld, C + r0 * N + c0, N);
  };
  if (mode == 0) {
    const int64_t tasks = std::min(threads, std::max<int64_t>(1, M * N * K >> 16));
    const Tiles t = choose_tiles(M, N, tasks);
    const int64_t rows = (M + t.tr - 1) / t.tr, cols = (N + t.tc - 1) / t.tc;
    parallel_for(t.tr * t.tc, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t r0 = (i / t.tc) * rows, c0 = (i % t.tc) * cols;
        if (r0 < M && c0 < N) tile(r0, std::min(M, r0 + rows), c0, std::min(N, c0 + cols));
      }
    });
    return;
  }
  if (N > M && N >= 64 * threads) {  // rows mode: columns for wide C (the tied LM head), else rows
    const int64_t min_cols = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, M * K));
    parallel_for(N, std::max(min_cols, (N + threads - 1) / threads), [&](int64_t c0, int64_t c1) { tile(0, M, c0, c1); });
    return;
  }
  parallel_for(M, row_grain(M, N, K), [&](int64_t r0, int64_t r1) { tile(r0, r1, 0, N); });
}

template <class T>
Tensor matmul_typed(Tensor a, Tensor b, bool ta, bool tb) {
  blas_setup();
  const int64_t M = ta ? a.size(-1) : a.size(-2), K = ta ? a.size(-2) : a.size(-1);
  const int64_t N = tb ? b.size(-2) : b.size(-1);
  const Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(ba, bb, "matmul");
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = Tensor::empty(out_shape, a.dtype());
  if (out.numel() == 0) return out;
  if (K == 0) {
    out = Tensor::zeros(out_shape, a.dtype());
    return out;
  }

  // Fold a's batch dims into M when b is a single matrix and a's rows are evenly strided (x @ W^T).
  bool folded = false;
  if (bb.empty() && !ta && a.dim() > 2 && a.is_contiguous()) {
    a = a.view({-1, a.size(-1)});
    folded = true;
  }

  // Expand both operands to the full batch so per-batch offsets come from (possibly zero) strides.
  Shape full_a = batch, full_b = batch;
  const int64_t ar = a.size(-2), ac = a.size(-1);
  full_a.push_back(ar);
  full_a.push_back(ac);
  full_b.push_back(b.size(-2));
  full_b.push_back(b.size(-1));
  MatDesc da{}, db{};
  Tensor ae = folded ? a : a.expand(full_a), be = b.expand(full_b);
  auto layout = [](Tensor& t, int64_t rows, int64_t cols, bool tr, MatDesc& d) {
    const int64_t nd = t.dim();
    if (!describe(t.strides()[nd - 2], t.strides()[nd - 1], rows, cols, tr, d)) {
      t = t.contiguous();
      describe(t.strides()[nd - 2], t.strides()[nd - 1], rows, cols, tr, d);
    }
  };
  layout(ae, ae.size(-2), ae.size(-1), ta, da);
  layout(be, be.size(-2), be.size(-1), tb, db);

  const T* A = ae.template data<T>();
  const T* B = be.template data<T>();
  T* C = out.template mutable_data<T>();

  if (folded) {  // one (batch*M) x N GEMM split across threads
    split_gemm<T>(da, db, ae.size(0), N, K, A, B, C);
    return out;
  }

  const int64_t nb = shape_numel(batch);
  const int64_t nbd = static_cast<int64_t>(batch.size());
  // Element offset of batch item i in a strided operand.
  auto batch_offset = [&](const Tensor& t, int64_t i) {
    int64_t off = 0;
    for (int64_t d = nbd - 1; d >= 0; --d) {
      const int64_t idx = i % batch[d];
      i /= batch[d];
      off += idx * t.strides()[d];
    }
    return off;
  };
  const int64_t work = M * N * K;
  if (nb == 1) {  // single large GEMM
    split_gemm<T>(da, db, M, N, K, A, B, C);
    return out;
  }
  parallel_for(nb, std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, work)), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      gemm<T>(da.trans, db.trans, M, N, K, A + batch_offset(ae, i), da.ld, B + batch_offset(be, i), db.ld,
              C + i * M * N, N);
  });
  return out;
}

}  // namespace

std::string blas_info() {
  const dnnl_version_t* v = dnnl_version();
  return (use_onednn() ? fmt::format("oneDNN {}.{}.{} sgemm; ", v->major, v->minor, v->patch) : std::string()) +
         openblas_get_config() + " core " + openblas_get_corename();
}

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  if (a.dtype() == DType::f64) return matmul_typed<double>(a, b, trans_a, trans_b);
  return matmul_typed<float>(a, b, trans_a, trans_b);
}

}  // namespace alpha::cpu
