// Tiled shared-memory matmul, batched over gl_WorkGroupID.z: C(b) = op(A(b)) * op(B(b)), (M, K) x (K, N).
// Each TILE x TILE workgroup stages a tile of A and of B in shared memory per K step. TILE is the
// specialization constant 0 (= local size x and y). Transposes are index swaps at load time.
#version 450
#include "push_constants.h"

layout(constant_id = 0) const uint TILE = 16;
layout(local_size_x_id = 0, local_size_y_id = 1) in;
layout(push_constant) uniform Push { MatmulPC p; };

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };

shared float As[TILE][TILE + 1];  // +1 column avoids bank conflicts on the transposed reads
shared float Bs[TILE][TILE + 1];

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint col = gl_WorkGroupID.x * TILE + tx;
  const uint row = gl_WorkGroupID.y * TILE + ty;
  const uint batch = gl_WorkGroupID.z;
  const uint abase = batch * p.a_bstride, bbase = batch * p.b_bstride;
  float acc = 0.0;
  for (uint k0 = 0; k0 < p.K; k0 += TILE) {
    const uint ka = k0 + tx;  // A(row, ka)
    As[ty][tx] = (row < p.M && ka < p.K) ? a[abase + (p.trans_a != 0 ? ka * p.lda + row : row * p.lda + ka)] : 0.0;
    const uint kb = k0 + ty;  // B(kb, col)
    Bs[ty][tx] = (kb < p.K && col < p.N) ? b[bbase + (p.trans_b != 0 ? col * p.ldb + kb : kb * p.ldb + col)] : 0.0;
    barrier();
    for (uint k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    barrier();
  }
  if (row < p.M && col < p.N) c[batch * p.M * p.N + row * p.N + col] = acc;
}
