// Strided gather into an output view: out[ooffset + sum_k c_k * ostride_k] = src[offset + sum_k c_k * stride_k],
// where c is the row-major coordinate of i in the (up to 6-d) shape (ostride: contiguous strides, or the strides
// of the output ops::cat writes this source's window of). Elements are copied as 32-bit words, so one
// kernel serves f32 and i32; U16: 16-bit elements (f16). Window (narrow's backward): along dim wdim only coordinates in
// [wstart, wstart + wlen) read the source (at c - wstart); the rest are written 0.
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { CopyPC p; };
#ifdef U16
#define WORD uint16_t
#else
#define WORD uint
#endif
layout(std430, binding = 0) readonly buffer S { WORD s[]; };
layout(std430, binding = 1) writeonly buffer O { WORD o[]; };

void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  uint rest = i, src = p.offset, dst = p.ooffset;
  bool zero = false;
  // Innermost dim first: dims are padded with leading 1s to 6.
  for (int k = 5; k >= 0; --k) {
    const uint size = p.size[k], stride = p.stride[k];
    uint c = rest % size;
    rest /= size;
    dst += c * p.ostride[k];
    if (uint(k) == p.wdim) {
      if (c < p.wstart || c >= p.wstart + p.wlen) {  // outside the window: no source read at all
        zero = true;
        continue;
      }
      c -= p.wstart;
    }
    src += c * stride;
  }
  if (zero) o[dst] = WORD(0u);
  else o[dst] = s[src];
}
