// Register-tiled SIMT matmul, batched over gl_WorkGroupID.z: C(b) = op(A(b)) * op(B(b)), (M, K) x (K, N).
// 256 invocations as 16 x 16 compute a BM x BN tile (BM = 16*TM, BN = 16*TN); invocation (tx, ty) owns TM/4
// groups of 4 rows at 64*g + 4*ty and TN/4 groups of 4 columns at 64*g + 4*tx, read from shared memory as vec4s
// (a quarter of the load instructions; a subgroup's B reads are 256 contiguous bytes). Per BK step the tile's A and B slices go to shared memory K-major, prefetched into registers one
// step ahead so global loads overlap the FMAs. Variants: SMALL (64 x 64 tiles, for small grids), F16 storage,
// OUT_F32 (with F16: f32 output).
// The transposes are specialization constants 0 (A) and 1 (B): they only change the load index patterns.
#version 450
#extension GL_EXT_control_flow_attributes : require
#ifdef F16
#extension GL_EXT_shader_16bit_storage : require
#define T float16_t
#else
#define T float
#endif
#ifdef OUT_F32
#define CT float  // f16 operands, the f32 accumulators stored unrounded (ops::matmul_f32: f32 weight gradients)
#else
#define CT T
#endif
#include "push_constants.h"

#ifdef SMALL
#define TM 4
#define TN 4
#define BK 16
#else
#define TM 8
#define TN 8
#define BK 16  // 16 rather than 8: half the barriers per FLOP (H200, 4096^3: 36.2 vs 34.6 TFLOP/s)
#endif
#define BM (16 * TM)
#define BN (16 * TN)
#define LOADS (BM * BK / 256)  // elements of A (and of B) each invocation stages per K step

// Fixed: the register tile shape above is derived from 256 invocations.
layout(local_size_x = 256) in;
layout(constant_id = 0) const bool TRANS_A = false;
layout(constant_id = 1) const bool TRANS_B = false;
layout(push_constant) uniform Push { MatmulPC p; };

layout(std430, binding = 0) readonly buffer A { T a[]; };
layout(std430, binding = 1) readonly buffer B { T b[]; };
layout(std430, binding = 2) writeonly buffer C { CT c[]; };

// Rows padded by one vec4: the k-contiguous staging pattern (BK values of k x 32 / BK rows per subgroup) then
// hits distinct banks (2-way for BK = 16: stores only, 1/8 as frequent as the reads).
shared vec4 As[BK][BM / 4 + 1];  // As[k][m / 4][m % 4]: A(m0 + m, k0 + k)
shared vec4 Bs[BK][BN / 4 + 1];  // Bs[k][n / 4][n % 4]: B(k0 + k, n0 + n)

// Staging index pattern for an (R x BK) tile slice of an operand whose memory runs along k (k_contig) or
// along R: consecutive invocations take consecutive addresses, so the global loads coalesce.
void slot(uint t, uint e, uint R, bool k_contig, out uint r, out uint k) {
  if (k_contig) { k = t % BK; r = t / BK + e * (256 / BK); }
  else          { r = t % R;  k = t / R + e * (256 / R); }
}

void main() {
  const uint t = gl_LocalInvocationID.x, tx = t % 16, ty = t / 16;
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, batch = gl_WorkGroupID.z / p.splits;
  const uint kbeg = (gl_WorkGroupID.z % p.splits) * p.k_chunk, kend = min(p.K, kbeg + p.k_chunk);
  const uint abase = batch * p.a_bstride, bbase = batch * p.b_bstride;
  float ra[LOADS], rb[LOADS];  // the next K step's slices, in flight while the current one is multiplied
  float acc[TM][TN];
  [[unroll]] for (uint i = 0; i < TM; ++i) [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;

  for (uint k0 = kbeg; k0 < kend + BK; k0 += BK) {
    if (k0 > kbeg) {
      // Hazard: every invocation must be done reading the previous slices before they are overwritten.
      barrier();
      [[unroll]] for (uint e = 0; e < LOADS; ++e) {
        uint r, k;
        slot(t, e, BM, !TRANS_A, r, k);
        As[k][r / 4][r % 4] = ra[e];
        slot(t, e, BN, TRANS_B, r, k);
        Bs[k][r / 4][r % 4] = rb[e];
      }
      // Hazard: the slices must be complete before any invocation reads them.
      barrier();
    }
    if (k0 < kend) {  // prefetch the slices of step k0 (multiplied in the next iteration)
      [[unroll]] for (uint e = 0; e < LOADS; ++e) {
        uint r, k;
        slot(t, e, BM, !TRANS_A, r, k);
        const uint m = m0 + r, kk = k0 + k;
        ra[e] = (m < p.M && kk < kend) ? float(a[abase + (TRANS_A ? kk * p.lda + m : m * p.lda + kk)]) : 0.0;
        slot(t, e, BN, TRANS_B, r, k);
        const uint n = n0 + r, kb = k0 + k;
        rb[e] = (n < p.N && kb < kend) ? float(b[bbase + (TRANS_B ? n * p.ldb + kb : kb * p.ldb + n)]) : 0.0;
      }
    }
    if (k0 > kbeg) {
      [[unroll]] for (uint k = 0; k < BK; ++k) {
        vec4 av[TM / 4], bv[TN / 4];
        [[unroll]] for (uint g = 0; g < TM / 4; ++g) av[g] = As[k][16 * g + ty];
        [[unroll]] for (uint g = 0; g < TN / 4; ++g) bv[g] = Bs[k][16 * g + tx];
        [[unroll]] for (uint i = 0; i < TM; ++i)
          [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] += av[i / 4][i % 4] * bv[j / 4][j % 4];
      }
    }
  }
  const uint cbase = gl_WorkGroupID.z * p.M * p.N;  // (batch, split) slice
  [[unroll]] for (uint i = 0; i < TM; ++i) {
    const uint row = m0 + 64 * (i / 4) + 4 * ty + i % 4;
    if (row >= p.M) continue;
    [[unroll]] for (uint j = 0; j < TN; ++j) {
      const uint col = n0 + 64 * (j / 4) + 4 * tx + j % 4;
      if (col < p.N) c[cbase + row * p.N + col] = CT(acc[i][j]);
    }
  }
}
