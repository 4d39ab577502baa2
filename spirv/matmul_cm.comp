// Cooperative-matrix matmul (GL_NV_cooperative_matrix): f16 operands, f32 accumulation, batched over
// gl_WorkGroupID.z like matmul.comp (same push constants). SG_M x SG_N subgroups of 32 compute a BM x BN tile;
// each subgroup owns a (16 FM) x (16 FN) block of 16 x 16 fragments (default: 2 x 4 subgroups of 64 x 32 = a
// 128 x 128 tile; -DSG_M, -DSG_N, -DFN give wider ones: 64 x 64 per subgroup, tiles 128x128 / 128x256 / 256x128
// measured no faster on an H200, docs/PERFORMANCE.md). Per K step (BK 32, or 64) the tile's A and B slices are
// converted to f16 in shared memory, stored as their memory runs (row-major, or column-major for a transposed
// operand, which coopMatLoadNV reads as such), prefetched into registers one step ahead. The epilogue passes
// each fragment through shared memory so edge tiles store only their valid part (any M, N, K).
// Variants: IN_F16 (f16 A/B storage; default f32, converted on load), OUT_F16 (f16 C storage), VEC8 (with IN_F16:
// 16-byte loads of 8 halves; M, N, K, lda, ldb and batch strides multiples of 8, which vk/ checks), BK (K step).
#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_NV_cooperative_matrix : require
#include "push_constants.h"

#ifdef IN_F16
#define IN_T float16_t
#else
#define IN_T float
#endif
#ifdef VEC8
#define EL_IN uvec4
#else
#define EL_IN IN_T
#endif
#ifdef OUT_F16
#define OUT_T float16_t
#else
#define OUT_T float
#endif

#ifndef SG_M
#define SG_M 2  // subgroups along M
#endif
#ifndef SG_N
#define SG_N 4  // subgroups along N
#endif
#define FM 4    // fragments per subgroup along M
#ifndef FN
#define FN 2    // fragments per subgroup along N
#endif
#define NT (32 * SG_M * SG_N)  // invocations
#define BM (SG_M * FM * 16)
#define BN (SG_N * FN * 16)
#ifndef BK
#define BK 32  // VEC8 variants use 64 (-DBK=64): half the barriers per FLOP (H200, 4096^3: 142.6 vs 108.6 TFLOP/s)
#endif
#define PAD 8                   // f16 elements: keeps every staged row 16-byte aligned, shifts banks per row
#define LOADS_A (BM * BK / NT / V)  // staged elements of A per invocation and K step
#define LOADS_B (BN * BK / NT / V)  // ... of B

// Subgroups of 32 (the device check requires subgroup size 32); the tile shape derives from them.
layout(local_size_x = NT) in;
layout(constant_id = 0) const bool TRANS_A = false;
layout(constant_id = 1) const bool TRANS_B = false;
layout(push_constant) uniform Push { MatmulPC p; };

#ifdef VEC8
#define V 8u        // halves per staged element (a uvec4)
#define EL uvec4
#else
#define V 1u
#define EL float16_t
#endif
layout(std430, binding = 0) readonly buffer A { EL_IN a[]; };
layout(std430, binding = 1) readonly buffer B { EL_IN b[]; };
layout(std430, binding = 2) writeonly buffer C { OUT_T c[]; };

// A slice: row-major [BM][BK + PAD], or column-major [BK][BM + PAD] when A is transposed; B likewise. Offsets
// are in halves; VEC8 arrays hold 8 halves per element (row strides 40 and 136 halves are multiples of 8).
shared EL As[BM * (BK + PAD) / V];
shared EL Bs[BN * (BK + PAD) / V];
shared float Cs[SG_M * SG_N * 256];  // one 16 x 16 f32 fragment per subgroup, for the epilogue

// Staging pattern: consecutive invocations take consecutive addresses of the operand's memory (V halves each).
void slot(uint t, uint e, uint R, bool k_contig, out uint r, out uint k) {
  if (k_contig) { k = (t % (BK / V)) * V; r = t / (BK / V) + e * (NT / (BK / V)); }
  else          { r = (t % (R / V)) * V;  k = t / (R / V) + e * (NT / (R / V)); }
}
// Shared offset of element (r, k) of a slice stored along k (row-major) or along r.
uint soff(uint r, uint k, uint R, bool k_contig) { return k_contig ? r * (BK + PAD) + k : k * (R + PAD) + r; }

void main() {
  const uint t = gl_LocalInvocationID.x, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, batch = gl_WorkGroupID.z / p.splits;
  const uint kbeg = (gl_WorkGroupID.z % p.splits) * p.k_chunk, kend = min(p.K, kbeg + p.k_chunk);
  const uint abase = batch * p.a_bstride, bbase = batch * p.b_bstride;
  const uint wm = (sg / SG_N) * (FM * 16), wn = (sg % SG_N) * (FN * 16);  // this subgroup's block in the tile
  const bool a_kc = !TRANS_A, b_kc = TRANS_B;                         // operand memory runs along k
  const uint a_ld = a_kc ? BK + PAD : BM + PAD, b_ld = b_kc ? BK + PAD : BN + PAD;

  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[FM][FN];
  [[unroll]] for (uint i = 0; i < FM; ++i)
    [[unroll]] for (uint j = 0; j < FN; ++j) acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
  EL ra[LOADS_A], rb[LOADS_B];  // the next K step's slices, in flight while the current one is multiplied

  for (uint k0 = kbeg; k0 < kend + BK; k0 += BK) {
    if (k0 > kbeg) {
      // Hazard: every subgroup must be done loading fragments of the previous slices before they are overwritten.
      barrier();
      [[unroll]] for (uint e = 0; e < LOADS_A; ++e) {
        uint r, k;
        slot(t, e, BM, a_kc, r, k);
        As[soff(r, k, BM, a_kc) / V] = ra[e];
      }
      [[unroll]] for (uint e = 0; e < LOADS_B; ++e) {
        uint r, k;
        slot(t, e, BN, b_kc, r, k);
        Bs[soff(r, k, BN, b_kc) / V] = rb[e];
      }
      // Hazard: the slices must be complete before any subgroup loads fragments from them.
      barrier();
    }
    if (k0 < kend) {  // prefetch the slices of step k0 (multiplied in the next iteration)
      [[unroll]] for (uint e = 0; e < LOADS_A; ++e) {
        uint r, k;
        slot(t, e, BM, a_kc, r, k);
        const uint m = m0 + r, ka = k0 + k;
        // VEC8: a whole vector is in or out of range (M, N, K and kend are multiples of 8).
        ra[e] = (m < p.M && ka < kend) ? EL(a[(abase + (TRANS_A ? ka * p.lda + m : m * p.lda + ka)) / V]) : EL(0);
      }
      [[unroll]] for (uint e = 0; e < LOADS_B; ++e) {
        uint r, k;
        slot(t, e, BN, b_kc, r, k);
        const uint n = n0 + r, kb = k0 + k;
        rb[e] = (n < p.N && kb < kend) ? EL(b[(bbase + (TRANS_B ? n * p.ldb + kb : kb * p.ldb + n)) / V]) : EL(0);
      }
    }
    if (k0 > kbeg) {
      [[unroll]] for (uint ks = 0; ks < BK; ks += 16) {
        fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[FM];
        [[unroll]] for (uint i = 0; i < FM; ++i)
          coopMatLoadNV(fa[i], As, soff(wm + 16 * i, ks, BM, a_kc) / V, a_ld / V, TRANS_A);
        [[unroll]] for (uint j = 0; j < FN; ++j) {
          fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fb;
          // B(k, n) sits at soff(n, k): row-major over k x n when B is not transposed, column-major when it is.
          coopMatLoadNV(fb, Bs, soff(wn + 16 * j, ks, BN, b_kc) / V, b_ld / V, TRANS_B);
          [[unroll]] for (uint i = 0; i < FM; ++i) acc[i][j] = coopMatMulAddNV(fa[i], fb, acc[i][j]);
        }
      }
    }
  }

  const uint cbase = gl_WorkGroupID.z * p.M * p.N;  // (batch, split) slice
  [[unroll]] for (uint i = 0; i < FM; ++i) {
    [[unroll]] for (uint j = 0; j < FN; ++j) {
      coopMatStoreNV(acc[i][j], Cs, sg * 256, 16, false);
      // Hazard: every lane's part of the fragment must be in shared memory before lanes read across it.
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      [[unroll]] for (uint e = 0; e < 8; ++e) {
        const uint idx = lane + 32 * e, row = m0 + wm + 16 * i + idx / 16, col = n0 + wn + 16 * j + idx % 16;
        if (row < p.M && col < p.N) c[cbase + row * p.N + col] = OUT_T(Cs[sg * 256 + idx]);
      }
      // Hazard: the reads must finish before the next fragment overwrites this subgroup's scratch.
      subgroupBarrier();
    }
  }
}
