// Batched matmul on OpenBLAS. Legend: M rows of the result, N columns, K the contracted dim.
// OpenBLAS runs one thread per call; we split rows across our own pool so results never depend on timing.
#include "core/cpu/matmul.h"

#include <cblas.h>

#include "core/parallel.h"

namespace alpha::cpu {

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
  const auto TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, TA, TB, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
  else
    cblas_dgemm(CblasRowMajor, TA, TB, (int)M, (int)N, (int)K, 1.0, A, (int)lda, B, (int)ldb, 0.0, C, (int)ldc);
}

// Rows per task when one GEMM is split by rows: one equal block per thread (GEMM blocks balance well, and
// fewer, larger calls keep OpenBLAS efficient), but never blocks under ~64K multiply-adds.
int64_t row_grain(int64_t rows, int64_t N, int64_t K) {
  const int64_t min_rows = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, N * K));
  const int64_t per_thread = (rows + num_threads() - 1) / num_threads();
  return std::max(min_rows, per_thread);
}

template <class T>
Tensor matmul_typed(Tensor a, Tensor b, bool ta, bool tb) {
  static const bool single = [] {
    openblas_set_num_threads(1);  // our pool does the threading; OpenBLAS's own workers would compete
    return true;
  }();
  (void)single;
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

  if (folded) {  // one (batch*M) x N GEMM, rows split across threads
    const int64_t rows = ae.size(0);
    const int64_t grain = row_grain(rows, N, K);
    parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
      gemm<T>(da.trans, db.trans, r1 - r0, N, K, A + r0 * da.ld, da.ld, B, db.ld, C + r0 * N, N);
    });
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
  if (nb == 1) {  // single large GEMM: split rows of C
    const int64_t grain = row_grain(M, N, K);
    parallel_for(M, grain, [&](int64_t r0, int64_t r1) {
      const T* Ar = da.trans ? A + r0 : A + r0 * da.ld;  // row r0 of op(A)
      gemm<T>(da.trans, db.trans, r1 - r0, N, K, Ar, da.ld, B, db.ld, C + r0 * N, N);
    });
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

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  if (a.dtype() == DType::f64) return matmul_typed<double>(a, b, trans_a, trans_b);
  return matmul_typed<float>(a, b, trans_a, trans_b);
}

}  // namespace alpha::cpu
