// Rotary position embedding, rotate-half convention (GPT-NeoX, Hugging Face Llama): channel i pairs with
// i + D/2, both rotated by the angle of (position, i). Legend: B batch, T time, H heads, D head size.
// Plain loops (the oracle); math in double from the tables' values.
#include "core/cpu/rope.h"

#include <vector>

#include "core/parallel.h"

namespace alpha::cpu {

namespace {

template <class S>
Tensor rope_typed(const Tensor& xin, const Tensor& cos, const Tensor& sin, int64_t pos0, bool inverse, int64_t rot) {
  const Tensor x = xin.contiguous();
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), D = x.size(3), half = D / 2;
  // The table rows this call uses, (T, D/2), in double.
  const std::vector<double> c = cos.narrow(0, pos0, T).to_f64_vector(), s = sin.narrow(0, pos0, T).to_f64_vector();
  const double sgn = inverse ? -1.0 : 1.0;
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const S* px = x.data<S>();
  S* po = out.mutable_data<S>();
  parallel_for(B * T, std::max<int64_t>(1, 8192 / (H * D)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {  // r = b * T + t
      const int64_t t = r % T;
      for (int64_t h = 0; h < H; ++h) {
        const S* xr = px + (r * H + h) * D;
        S* yr = po + (r * H + h) * D;
        if (h >= rot) {  // a head that passes through (a fused qkv's v)
          for (int64_t i = 0; i < D; ++i) yr[i] = xr[i];
          continue;
        }
        for (int64_t i = 0; i < half; ++i) {
          const double ci = c[static_cast<size_t>(t * half + i)], si = sgn * s[static_cast<size_t>(t * half + i)];
          const double a = static_cast<double>(xr[i]), b = static_cast<double>(xr[i + half]);
          yr[i] = static_cast<S>(a * ci - b * si);
          yr[i + half] = static_cast<S>(b * ci + a * si);
        }
      }
    }
  });
  return out;
}

}  // namespace

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t pos0, bool inverse, int64_t rot_heads) {
  return x.dtype() == DType::f64 ? rope_typed<double>(x, cos, sin, pos0, inverse, rot_heads)
                                 : rope_typed<float>(x, cos, sin, pos0, inverse, rot_heads);
}

}  // namespace alpha::cpu
