// Push-constant layouts shared by C++ (vk/) and GLSL (spirv/*.comp): one definition, so the two sides
// cannot drift. Only 4-byte scalars, so std430 (GLSL) and C++ layouts coincide; C++ static_asserts sizes.
// Element counts are in elements of the storage type (vec4s in vec4 variants).
#ifdef __cplusplus
#pragma once
#include <cstdint>
namespace alpha::vk::pc {
using uint = uint32_t;
#endif

// out[i] = a[i % an] OP b[i % bn]: same shape (an = bn = n) or a trailing vector/scalar broadcast.
struct BinaryPC { uint n; uint an; uint bn; uint pad; };
// out[i] = OP(x[i]); affine uses mul/add.
struct UnaryPC { uint n; float mul; float add; uint pad; };
// C(b) = op(A(b)) op(B(b)); A/B element (r, c) at base + r*ld + c before transposition; C contiguous.
struct MatmulPC { uint M; uint N; uint K; uint lda; uint ldb; uint a_bstride; uint b_bstride; uint trans_a; uint trans_b; };
// x seen as (outer, n, inner); out[o, i] = scale * sum_k x[o, k, i]. Column sums (inner > 1) split n into
// chunks of `chunk`: out is (outer, ceil(n / chunk), inner) partial sums (vk/ sums those again).
struct SumPC { uint outer; uint n; uint inner; float scale; uint chunk; };
// Row softmax over cols; causal: row r (r % tq) sees cols j <= r % tq + (cols - tq).
struct SoftmaxPC { uint rows; uint cols; uint tq; uint causal; };
// Backward dw/db: per-column partial sums over row chunks of `chunk` rows, (ceil(rows / chunk), cols).
struct LayerNormPC { uint rows; uint cols; float eps; uint has_w; uint has_b; uint chunk; };
struct GeluPC { uint n; };
// Forward: per-row lse and loss; backward: scale = dloss / count.
struct CrossEntropyPC { uint rows; uint cols; int ignore_index; float scale; };
// Forward: n_idx rows gathered; backward: one invocation per (vocab row, column).
struct EmbeddingPC { uint n_idx; uint cols; uint vocab; };
// Kept iff (philox_at(seed, offset + i) >> 8) >= threshold, i.e. u32_to_unit(...) >= p exactly.
struct DropoutPC { uint n; uint seed_lo; uint seed_hi; uint off_lo; uint off_hi; uint threshold; float scale; };
// Strided gather of 32-bit words into a contiguous (6-d, leading 1s) output; window along wdim (see copy.comp).
// uint arrays have a 4-byte stride in std430 push constants, as in C++.
struct CopyPC { uint n; uint offset; uint size[6]; uint stride[6]; uint wdim; uint wstart; uint wlen; };

#ifdef __cplusplus
static_assert(sizeof(BinaryPC) == 16 && sizeof(UnaryPC) == 16 && sizeof(MatmulPC) == 36);
static_assert(sizeof(SumPC) == 20 && sizeof(SoftmaxPC) == 16 && sizeof(LayerNormPC) == 24);
static_assert(sizeof(CrossEntropyPC) == 16 && sizeof(EmbeddingPC) == 12 && sizeof(DropoutPC) == 28);
static_assert(sizeof(CopyPC) == 68);
}  // namespace alpha::vk::pc
#endif
