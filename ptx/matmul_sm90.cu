// Hopper GEMM tiles on warpgroup MMAs (wgmma, sm_90a) for VK_NVX_binary_import (vk/nvx.h), in CUDA C++ compiled by
// clang to PTX like ptx/matmul.cu; ptx/CMakeLists.txt then marks the text sm_90a (PTX 8.0), which clang 14 cannot
// target, and the driver compiles it only for Hopper GPUs. A BM x BN block tile (BM 128 or 64, BN 256 or 128): one
// warpgroup of 128 threads per 64 rows, each a 64 x BN product per m64nBNk16 step on operands in shared memory; K by 64
// through S stages of cp.async copies. C (M, N) = op(A) . op(B) with f32 accumulation (f16 C: + bias, + resid
// as ptx/common.cuh's store2); M, N, K whole tiles. A grid of Z > 1 layers splits K (f32 C only): layer z sums
// slice z of K / Z into its own (M, N) partial at C + z M N, which vk/nvx.cpp then adds up in order.
//
// Shared layouts (what the wgmma descriptors describe), 128-byte swizzle: 16-byte chunk c of a 128-byte row r sits
// at c ^ (r % 8), 8 rows form a 1024-byte atom. A (BM x 64, K-major): row m at m * 128; with TA (64 x BM, M-major):
// BM / 64 slabs of 8 KiB, one per warpgroup, row k of slab j at j * 8192 + k * 128. B with TB (BN x 64,
// K-major): row n at n * 128. B without TB (64 x BN, N-major): BN / 64 column slabs of 8 KiB, row k of slab j at
// j * 8192 + k * 128.
#include "ptx/common.cuh"

// cp.async writes through the generic proxy, wgmma reads through the async proxy: a proxy fence orders them.
DEV void fence_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
DEV void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
DEV void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N, int R> DEV void wg_wait(float (&d)[R]) {  // the accumulators are the wgmma's outputs: tie them here
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
  asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
// A shared-memory matrix descriptor: start address, leading and stride byte offsets (16-byte units), 128B swizzle.
DEV u64 desc(u32 addr, u32 lbo, u32 sbo) {
  return u64((addr & 0x3FFFF) >> 4) | u64(lbo >> 4) << 16 | u64(sbo >> 4) << 32 | u64(1) << 62;
}
// One k16 step of the warpgroup's 64 x N product (N = 256 or 128); scale-d 1: D += A B. The trans immediates: 0 for
// K-major A / B (TB), 1 for M-major A (TA) / N-major B. The accumulators are read and written in place ("+f"), 8 and 64 at a time.
#define ALPHA_F8(b) "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3]), "+f"(d[b + 4]), "+f"(d[b + 5]), \
                    "+f"(d[b + 6]), "+f"(d[b + 7])
#define ALPHA_F64(b) ALPHA_F8(b), ALPHA_F8(b + 8), ALPHA_F8(b + 16), ALPHA_F8(b + 24), ALPHA_F8(b + 32), \
                     ALPHA_F8(b + 40), ALPHA_F8(b + 48), ALPHA_F8(b + 56)
template <int TA, int TB> DEV void mma(float (&d)[128], u64 da, u64 db) {  // m64n256k16: 128 accumulators a thread
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, %132, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, %130, %131; }"
      : ALPHA_F64(0), ALPHA_F64(64)
      : "l"(da), "l"(db), "n"(TA ? 1 : 0), "n"(TB ? 0 : 1), "r"(1u)
      : "memory");
}
template <int TA, int TB> DEV void mma(float (&d)[64], u64 da, u64 db) {  // m64n128k16: 64 accumulators a thread
  asm volatile(
      "{ .reg .pred p; setp.ne.b32 p, %68, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, %66, %67; }"
      : ALPHA_F64(0)
      : "l"(da), "l"(db), "n"(TA ? 1 : 0), "n"(TB ? 0 : 1), "r"(1u)
      : "memory");
}
#undef ALPHA_F64
#undef ALPHA_F8

// W wgmma groups stay in flight past their iteration: 1 from 3 stages on (a stage in use, one still read by the
// previous group, the rest being copied), 0 with 2 (each group waited for; the other stage is being copied).
template <int BM, int BN, int S, int G, bool TA, bool TB, bool F32>
DEV void gemm(const h16* A, const h16* B, void* C, const h16* bias, const h16* resid, u32 M, u32 N, u32 K) {
  constexpr int BK = 64, NT = BM / 64 * 128, W = S >= 3 ? 1 : 0, P = S - 1 - W;  // P: tiles copied ahead
  static_assert(BN == 256 || BN == 128, "one m64nBNk16 per k16 step");
  static_assert(BM == 128 || BM == 64, "one or two warpgroups");
  static_assert(S >= 2, "a stage in use and one being copied");
  constexpr u32 ASZ = BM * BK * 2, STAGE = (BM + BN) * BK * 2;
  const u32 t = __nvvm_read_ptx_sreg_tid_x(), wg = t >> 7, lane = t & 31, warp = (t >> 5) & 3;
  u32 bx = __nvvm_read_ptx_sreg_ctaid_x(), by = __nvvm_read_ptx_sreg_ctaid_y();
  group_walk<G>(bx, by);
  const u32 m0 = by * BM, n0 = bx * BN, base = saddr(smem);
  // Split K: this layer's slice [kb, kb + KS) and partial (a grid of one layer: all of K into C).
  const u32 z = __nvvm_read_ptx_sreg_ctaid_z(), KS = K / __nvvm_read_ptx_sreg_nctaid_z(), kb = z * KS;
  C = (char*)C + (size_t)z * M * N * (F32 ? 4 : 2);
  auto load = [&](u32 s, u32 k0) {
    const u32 sa = base + s * STAGE, sb = sa + ASZ;
#pragma unroll
    for (int it = 0; it < BM * 8 / NT; ++it) {
      const u32 i = t + it * NT;
      if (TA) {  // 64 rows k of BM / 8 chunks, chunk c in slab c / 8
        const u32 r = i / (BM / 8), c = i % (BM / 8);
        cp16(sa + (c >> 3) * 8192 + r * 128 + (((c & 7) ^ (r & 7)) << 4), A + (size_t)(k0 + r) * M + m0 + c * 8);
      } else {   // BM rows m of 8 chunks
        const u32 r = i >> 3, c = i & 7;
        cp16(sa + r * 128 + ((c ^ (r & 7)) << 4), A + (size_t)(m0 + r) * K + k0 + c * 8);
      }
    }
#pragma unroll
    for (int it = 0; it < BN * 8 / NT; ++it) {
      const u32 i = t + it * NT;
      if (TB) {  // BN rows n of 8 chunks
        const u32 r = i >> 3, c = i & 7;
        cp16(sb + r * 128 + ((c ^ (r & 7)) << 4), B + (size_t)(n0 + r) * K + k0 + c * 8);
      } else {   // 64 rows k of BN / 8 chunks, chunk c in slab c / 8
        const u32 r = i / (BN / 8), c = i % (BN / 8);
        cp16(sb + (c >> 3) * 8192 + r * 128 + (((c & 7) ^ (r & 7)) << 4), B + (size_t)(k0 + r) * N + n0 + c * 8);
      }
    }
  };
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
  const int KT = KS / BK;
#pragma unroll
  for (int s = 0; s < P; ++s) { if (s < KT) load(s, kb + s * BK); commit(); }
  for (int kt = 0; kt < KT; ++kt) {
    wait_group<P - 1>();  // this thread's copies of tile kt
    fence_async();
    // Every thread's copies of tile kt visible to the wgmmas; every warpgroup past its wait for group kt - 1 - W,
    // the last reader of the stage refilled next.
    barrier();
    if (kt + P < KT) load((kt + P) % S, kb + (kt + P) * BK);  // the stage of tile kt - 1 - W (P = S - 1 - W)
    commit();
    const u32 sa = base + (kt % S) * STAGE, sb = sa + ASZ;
    wg_fence();
#pragma unroll
    for (int s = 0; s < BK / 16; ++s) {  // k16 steps: +32 bytes along K-major rows, +2 atoms down M/N-major slabs
      const u64 da = TA ? desc(sa + wg * 8192 + s * 2048, 8192, 1024) : desc(sa + wg * 8192 + s * 32, 16, 1024);
      const u64 db = TB ? desc(sb + s * 32, 16, 1024) : desc(sb + s * 2048, 8192, 1024);
      mma<TA, TB>(acc, da, db);
    }
    wg_commit();
    wg_wait<W>(acc);  // group kt - W done: its stage may be refilled after the next barrier
  }
  wg_wait<0>(acc);
  wait_group<0>();
  // Accumulators of m64nNk16: row 16 * warp + lane / 4 (+ 8), columns 8 * j + 2 * (lane % 4) (+ 1).
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
    const u32 r = m0 + wg * 64 + warp * 16 + (lane >> 2), c = n0 + j * 8 + (lane & 3) * 2;
    store2<F32>(C, bias, resid, N, r, c, acc[4 * j], acc[4 * j + 1]);
    store2<F32>(C, bias, resid, N, r + 8, c, acc[4 * j + 2], acc[4 * j + 3]);
  }
}

#include "ptx/matmul_variants.h"
#define ALPHA_PTX_ENTRY(name, BM, BN, BK, WM, WN, S, G, TA, TB, F32)             \
  GLOBAL __attribute__((launch_bounds(BM / 64 * 128))) void name(                  \
      const h16* A, const h16* B, void* C, const h16* bias, const h16* resid, u32 M, u32 N, u32 K) {  \
    gemm<BM, BN, S, G, TA != 0, TB != 0, F32 != 0>(A, B, C, bias, resid, M, N, K);                             \
  }
ALPHA_PTX_MATMUL_SM90_VARIANTS(ALPHA_PTX_ENTRY)
