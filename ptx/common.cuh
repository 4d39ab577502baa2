// Device helpers shared by ptx/'s kernels (clang CUDA without the CUDA toolkit: no headers, so the few types and
// intrinsics they need are spelled here as clang builtins and inline PTX).
#pragma once
#define DEV __attribute__((device)) static inline __attribute__((always_inline))
#define GLOBAL extern "C" __attribute__((global))
typedef unsigned short h16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned long size_t;
struct __attribute__((aligned(8))) float2v { float x, y; };
extern __attribute__((shared)) __attribute__((aligned(1024))) h16 smem[];  // the launch's dynamic shared memory

DEV u32 saddr(const void* p) { u32 r; asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p)); return r; }
DEV void cp16(u32 dst, const void* src) { asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory"); }
DEV void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> DEV void wait_group() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
DEV void barrier() { asm volatile("bar.sync 0;" ::: "memory"); }
DEV u32 pack(float lo, float hi) { u32 r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
DEV float h2f(h16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
DEV float lo_f(u32 v) { return h2f(h16(v & 0xffff)); }  // the f16 at the lower address of a pair
DEV float hi_f(u32 v) { return h2f(h16(v >> 16)); }

// Block (bx, by) of a gx x gy grid walked in groups of G block rows, column by column within a group (the group's
// A rows and B columns stay in L2); G = 0: as launched, row by row.
template <int G> DEV void group_walk(u32& bx, u32& by) {
  if (G == 0) return;
  const u32 gx = __nvvm_read_ptx_sreg_nctaid_x(), gy = __nvvm_read_ptx_sreg_nctaid_y();
  const u32 id = by * gx + bx, first = id / (G * gx) * G, rows = gy - first < G ? gy - first : G;
  by = first + id % (G * gx) % rows;
  bx = id % (G * gx) / rows;
}

// Outputs (r, c) and (r, c + 1) of C (M, N): f32 as they are; f16 with bias[c] (f16, null: none) added in f32 before
// the rounding, then resid (f16, C's shape, null: none) added to the rounded value and rounded again, as the separate
// f16 add would (spirv/matmul_cm.comp's EPI_BIAS and EPI_RESID).
template <bool F32>
DEV void store2(void* C, const h16* bias, const h16* resid, u32 N, u32 r, u32 c, float x, float y) {
  const size_t at = (size_t)r * N + c;
  if (F32) {
    *(float2v*)((float*)C + at) = float2v{x, y};
    return;
  }
  if (bias) {
    const u32 b = *(const u32*)(bias + c);
    x += lo_f(b);
    y += hi_f(b);
  }
  u32 v = pack(x, y);
  if (resid) {
    const u32 s = *(const u32*)(resid + at);
    v = pack(lo_f(v) + lo_f(s), hi_f(v) + hi_f(s));
  }
  *(u32*)((h16*)C + at) = v;
}
