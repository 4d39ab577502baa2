// Block-tiled f16 GEMM for NVIDIA GPUs in CUDA C++, compiled by clang to PTX at build time (no CUDA toolkit:
// clang's own device builtins and inline PTX) and launched through VK_NVX_binary_import (vk/nvx.h); the driver
// compiles the PTX for its GPU. What the GLSL coopmat tiles (spirv/matmul_cm.comp) cannot use: asynchronous
// global -> shared copies (cp.async, no register staging), ldmatrix, and shared memory beyond 48 KiB for deep
// pipelines. C (M, N) = op(A) (M, K) . op(B) (K, N) with f32 accumulation (f16 C: + bias, + resid as
// ptx/common.cuh's store2); M, N, K multiples of the block tile.
#include "ptx/common.cuh"

DEV u32 tid() { return __nvvm_read_ptx_sreg_tid_x(); }
DEV void ldm4(u32 (&r)[4], u32 a) { asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a)); }
DEV void ldm4t(u32 (&r)[4], u32 a) { asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a)); }
DEV void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// A tile of R rows x L 16-byte chunks: chunk c of row r sits at c ^ swz(r), so that 8 rows read by one ldmatrix
// phase (same logical chunk) land in 8 different 16-byte bank groups.
template <int L> DEV int swz(int r, int c) { return L >= 8 ? (c ^ (r & 7)) : L == 4 ? (c ^ ((r >> 1) & 3)) : (c ^ ((r >> 2) & 1)); }

template <int BM, int BN, int BK, int WM, int WN, int S, int G, bool TA, bool TB, bool F32>
DEV void gemm(const h16* A, const h16* B, void* C, const h16* bias, const h16* resid, u32 M, u32 N, u32 K) {
  constexpr int WX = BN / WN, NT = (BM / WM) * WX * 32;
  constexpr int MI = WM / 16, NI = WN / 8;
  // Shared tiles per stage: A as (BM rows, BK) or, TA, (BK rows, BM); B as (BK rows, BN) or, TB, (BN rows, BK).
  constexpr int AR = TA ? BK : BM, AC = TA ? BM : BK, BR = TB ? BN : BK, BC = TB ? BK : BN;
  constexpr int AL = AC / 8, BL = BC / 8, ASZ = AR * AC, BSZ = BR * BC;
  const u32 t = tid(), lane = t & 31, warp = t >> 5, wm = warp / WX, wn = warp % WX;
  u32 bx = __nvvm_read_ptx_sreg_ctaid_x(), by = __nvvm_read_ptx_sreg_ctaid_y();
  group_walk<G>(bx, by);
  const u32 m0 = by * BM, n0 = bx * BN;
  static_assert(AR * AL % NT == 0 && BR * BL % NT == 0, "whole chunks per thread");
  const u32 base = saddr(smem);
  auto load = [&](int s, u32 k0) {
    const u32 sa = base + s * (ASZ + BSZ) * 2, sb = sa + ASZ * 2;
#pragma unroll
    for (int it = 0; it < AR * AL / NT; ++it) {
      const int i = t + it * NT, r = i / AL, c = i % AL;
      const h16* src = TA ? A + (size_t)(k0 + r) * M + m0 + c * 8 : A + (size_t)(m0 + r) * K + k0 + c * 8;
      cp16(sa + (r * AC + swz<AL>(r, c) * 8) * 2, src);
    }
#pragma unroll
    for (int it = 0; it < BR * BL / NT; ++it) {
      const int i = t + it * NT, r = i / BL, c = i % BL;
      const h16* src = TB ? B + (size_t)(n0 + r) * K + k0 + c * 8 : B + (size_t)(k0 + r) * N + n0 + c * 8;
      cp16(sb + (r * BC + swz<BL>(r, c) * 8) * 2, src);
    }
  };
  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
  const int KT = K / BK;
#pragma unroll
  for (int s = 0; s < S - 1; ++s) { if (s < KT) load(s, s * BK); commit(); }
  for (int kt = 0; kt < KT; ++kt) {
    wait_group<S - 2>();
    barrier();  // tile kt landed for every thread's copies; every warp is done reading the stage refilled below
    if (kt + S - 1 < KT) load((kt + S - 1) % S, (kt + S - 1) * BK);
    commit();
    const u32 sa = base + (kt % S) * (ASZ + BSZ) * 2, sb = sa + ASZ * 2;
    const int j = lane >> 3, l8 = lane & 7;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      u32 af[MI][4], bf[NI][2];
#pragma unroll
      for (int i = 0; i < MI; ++i) {
        const int mb = wm * WM + i * 16;
        if (!TA) { const int r = mb + (lane & 15), c = kk * 2 + (lane >> 4); ldm4(af[i], sa + (r * AC + swz<AL>(r, c) * 8) * 2); }
        else { const int r = kk * 16 + (j >> 1) * 8 + l8, c = mb / 8 + (j & 1); ldm4t(af[i], sa + (r * AC + swz<AL>(r, c) * 8) * 2); }
      }
#pragma unroll
      for (int q = 0; q < NI / 2; ++q) {
        const int nb = wn * WN + q * 16;
        u32 b[4];
        if (TB) { const int r = nb + (j >> 1) * 8 + l8, c = kk * 2 + (j & 1); ldm4(b, sb + (r * BC + swz<BL>(r, c) * 8) * 2); }
        else { const int r = kk * 16 + (j & 1) * 8 + l8, c = nb / 8 + (j >> 1); ldm4t(b, sb + (r * BC + swz<BL>(r, c) * 8) * 2); }
        bf[2 * q][0] = b[0]; bf[2 * q][1] = b[1]; bf[2 * q + 1][0] = b[2]; bf[2 * q + 1][1] = b[3];
      }
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int q = 0; q < NI; ++q) mma(acc[i][q], af[i], bf[q][0], bf[q][1]);
    }
  }
  wait_group<0>();
  // C fragment: rows lane/4 (+8), columns 2*(lane%4) (+1).
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int q = 0; q < NI; ++q) {
      const u32 r = m0 + wm * WM + i * 16 + (lane >> 2), c = n0 + wn * WN + q * 8 + (lane & 3) * 2;
      store2<F32>(C, bias, resid, N, r, c, acc[i][q][0], acc[i][q][1]);
      store2<F32>(C, bias, resid, N, r + 8, c, acc[i][q][2], acc[i][q][3]);
    }
}

#include "ptx/matmul_variants.h"
#define ALPHA_PTX_ENTRY(name, BM, BN, BK, WM, WN, S, G, TA, TB, F32)                    \
  GLOBAL __attribute__((launch_bounds((BM / WM) * (BN / WN) * 32))) void name(               \
      const h16* A, const h16* B, void* C, const h16* bias, const h16* resid, u32 M, u32 N, u32 K) {  \
    gemm<BM, BN, BK, WM, WN, S, G, TA != 0, TB != 0, F32 != 0>(A, B, C, bias, resid, M, N, K);        \
  }
ALPHA_PTX_MATMUL_VARIANTS(ALPHA_PTX_ENTRY)
