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
// The transposes are specialization constants (they select load patterns, and coopmat layouts must be constant).
// Split-K: gl_WorkGroupID.z = batch * splits + s; slice s covers k in [s * k_chunk, (s + 1) * k_chunk) and
// writes C's partial sums at (batch * splits + s) * M * N (vk/ sums the slices in a fixed order).
struct MatmulPC { uint M; uint N; uint K; uint lda; uint ldb; uint a_bstride; uint b_bstride; uint splits; uint k_chunk; };
// x seen as (outer, n, inner); out[o, i] = scale * sum_k x[o, k, i]. Column sums (inner > 1) split n into
// chunks of `chunk`: out is (outer, ceil(n / chunk), inner) partial sums (vk/ sums those again).
// split (sum.comp OUT2): output elements from `split` (in the kernel's units) go to a second buffer, from its start.
struct SumPC { uint outer; uint n; uint inner; float scale; uint chunk; uint split; };
// sum.comp LAST: SumPC's fields, then the window of zeroed arrival counters (one per (outer, column block)) and the
// order of the last workgroup's sum over the chunk partials (seq != 0: in chunk order; else 16 strided lanes + tree).
struct SumLastPC { uint outer; uint n; uint inner; float scale; uint chunk; uint counter_off; uint seq; uint split; };
// Row softmax over cols; causal: row r (r % tq) sees cols j <= r % tq + (cols - tq).
struct SoftmaxPC { uint rows; uint cols; uint tq; uint causal; };
// Backward dw/db: per-column partial sums over row chunks of `chunk` rows, (ceil(rows / chunk), cols); db's from
// element db_off of its binding (both in one buffer: one sum pass finishes both).
struct LayerNormPC { uint rows; uint cols; float eps; uint has_w; uint has_b; uint chunk; uint db_off; };
struct GeluPC { uint n; };
// SwiGLU over n outputs: element i reads gate at idx = (i / cols) * row_stride + i % cols and up at idx + up_off
// (its gradients go to the same places): separate tensors (cols = n, up_off = 0), or the halves of one (N, 2F)
// gate/up tensor (cols = F, row_stride = 2F, up_off = F, one buffer bound twice).
struct SwiGLUPC { uint n; uint cols; uint row_stride; uint up_off; };
// Rotary embedding of x (rows = B*T, t_len = T, heads = H, half = D/2); row r is at position pos0 + r % t_len;
// sign = -1 rotates back (the backward). Heads >= rot_heads are copied unrotated (a fused qkv's v).
struct RopePC { uint rows; uint t_len; uint heads; uint half_d; uint pos0; float sign; uint rot_heads; };
// Forward: per-row lse and loss; backward: scale = dloss / count.
struct CrossEntropyPC { uint rows; uint cols; int ignore_index; float scale; };
// f16vec4 logits each invocation of the fused cross-entropy keeps in registers (100 registers; with its 256
// invocations V <= 51200).
#define CE_FUSED_WG 256
#define CE_FUSED_KEEP 50
// Forward: n_idx rows gathered; backward: one invocation per (split, vocab row, column), split s summing every
// splits-th position of the row from its s-th (splits = 1 in the forward).
struct EmbeddingPC { uint n_idx; uint cols; uint vocab; uint splits; };
// Kept iff (philox_at(seed, offset + i) >> 8) >= threshold, i.e. u32_to_unit(...) >= p exactly.
struct DropoutPC { uint n; uint seed_lo; uint seed_hi; uint off_lo; uint off_hi; uint threshold; float scale; };
// Strided gather of 32-bit words into a (6-d, leading 1s) output view at ooffset/ostride (a contiguous output,
// or cat's window of one); window along wdim (see copy.comp). uint arrays have a 4-byte stride in std430 push
// constants, as in C++.
struct CopyPC {
  uint n; uint offset; uint size[6]; uint stride[6]; uint wdim; uint wstart; uint wlen; uint ooffset; uint ostride[6];
};
// Fused attention (spirv/attention*.comp). Row i of a (b, h) pair sees keys j < min(tk, i + shift + 1)
// (causal: shift = tk - tq; else shift = tk). rows = B*H*tq. Dropout keeps (bh, i, j) iff the Philox word at
// offset + (bh*tq + i)*tk + j has (word >> 8) >= threshold (threshold 0: no dropout). Each input view is
// (offset, batch stride, head stride, row stride) in elements, unit stride along D: q k v g (g = dO); the
// row-dot kernel reads O through the q slot. out and lse are contiguous (B, T, H, D) / (B, H, T); dq, dk, dv
// rows (b, t) start at out_off[0|1|2] + (b*T + t)*out_row + h*D (out_row = H*D, or 3*H*D packed as qkv).
struct AttentionPC {
  uint H; uint tq; uint tk; uint shift; uint rows; uint threshold; float keep_scale; float scale;
  uint seed_lo; uint seed_hi; uint off_lo; uint off_hi; uint q[4]; uint k[4]; uint v[4]; uint g[4];
  uint out_row; uint out_off[3];
};
// GPU AdamW (adamw.comp): the update of one param of n floats with optim/adamw.cpp's float coefficients
// (decay = 1 - lr*wd, applied when apply_decay != 0); grad-norm partials of CHUNK = WG * ADAMW_NORM_ITEMS
// elements per workgroup at out_offset; the final norm over `parts` partials; the loss accumulation.
#define ADAMW_NORM_ITEMS 32
struct AdamWPC { uint n; float decay; float b1; float omb1; float b2; float omb2; float bc2_sqrt; float eps; float neg_step; uint apply_decay; };
#define ADAMW_NORM_GRADS 8  // grads per norm-partial dispatch: one barrier per 8 grads, not per grad
#define ADAMW_MULTI 6  // params per multi-param update (adamw.comp MULTI): 5 buffers each + stats <= lavapipe's 32
// The multi-param update: AdamWPC's shared coefficients (n and apply_decay unused), then per param its element count
// (a multiple of 4), its first workgroup, and bit w of decay_mask / h16_mask: decay it / write its f16 copy.
struct AdamWMultiPC { AdamWPC c; uint count; uint decay_mask; uint h16_mask; uint n[ADAMW_MULTI]; uint first[ADAMW_MULTI]; };
struct AdamWNormPC { uint count; uint out_offset; float inv_scale; uint n[ADAMW_NORM_GRADS]; uint first[ADAMW_NORM_GRADS]; };
struct AdamWFinalPC { uint parts; float max_norm; float inv_scale; uint check_loss; };
struct AdamWLossPC { uint first; };
// GPU Muon (muon.comp): one (rows, cols) matrix of n elements at `offset` of a (G, m, n) stack, transposed when
// tall: its momentum (w_in = 1 - momentum, w_nes = momentum) and update (decay = 1 - lr*wd, neg_lr = -lr); the
// partial sums and normalization of every matrix of a stack (mn elements each, `parts` partials each).
struct MuonMomentumPC { uint n; uint rows; uint cols; uint transpose; uint offset; float w_in; float w_nes; uint nesterov; };
struct MuonNormPC { uint mn; uint parts; };
struct MuonUpdatePC { uint n; uint rows; uint cols; uint transpose; uint offset; float decay; float neg_lr; float shape_scale; uint apply_decay; };

#ifdef __cplusplus
static_assert(sizeof(BinaryPC) == 16 && sizeof(UnaryPC) == 16 && sizeof(MatmulPC) == 36);
static_assert(sizeof(RopePC) == 28 && sizeof(SwiGLUPC) == 16);
static_assert(sizeof(SumPC) == 24 && sizeof(SumLastPC) == 32 && sizeof(SoftmaxPC) == 16 && sizeof(LayerNormPC) == 28);
static_assert(sizeof(CrossEntropyPC) == 16 && sizeof(EmbeddingPC) == 16 && sizeof(DropoutPC) == 28);
static_assert(sizeof(CopyPC) == 96 && sizeof(AttentionPC) == 128);
static_assert(sizeof(AdamWPC) == 40 && sizeof(AdamWMultiPC) == 100 && sizeof(AdamWNormPC) == 76 && sizeof(AdamWFinalPC) == 16 && sizeof(AdamWLossPC) == 4);
static_assert(sizeof(MuonMomentumPC) == 32 && sizeof(MuonNormPC) == 8 && sizeof(MuonUpdatePC) == 36);
}  // namespace alpha::vk::pc
#endif
