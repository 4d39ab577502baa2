// View ops share storage in the forward; their backward maps the gradient back through the inverse view.
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

Tensor reshape(const Tensor& x, const Shape& shape) {
  const Shape xs = x.shape();
  return record("reshape", ops::reshape(x, shape), {x},
                [xs](const Tensor& g) { return std::vector<Tensor>{ops::reshape(g, xs)}; });
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  return record("transpose", x.transpose(d0, d1), {x},
                [d0, d1](const Tensor& g) { return std::vector<Tensor>{g.transpose(d0, d1)}; });
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  Tensor y = x.permute(dims);
  std::vector<int64_t> inv(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inv[dims[i] < 0 ? dims[i] + x.dim() : dims[i]] = static_cast<int64_t>(i);
  return record("permute", y, {x}, [inv](const Tensor& g) { return std::vector<Tensor>{g.permute(inv)}; });
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  Tensor y = x.narrow(dim, start, length);
  const Shape xs = x.shape();
  return record("narrow", y, {x}, [xs, dim, start](const Tensor& g) {
    return std::vector<Tensor>{ops::narrow_backward(g, xs, dim, start)};  // zeros but the narrowed window
  });
}

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  Tensor y = ops::cat(xs, dim);
  const int64_t d = dim < 0 ? dim + y.dim() : dim;
  std::vector<int64_t> sizes;
  for (const Tensor& x : xs) sizes.push_back(x.size(d));
  return record("cat", y, xs, [d, sizes](const Tensor& g) {
    std::vector<Tensor> gs;
    int64_t at = 0;
    for (int64_t n : sizes) {  // a copy, not a view: a parameter's grad must be a tensor of its own (GPU AdamW)
      gs.push_back(ops::cat({g.narrow(d, at, n)}, d));
      at += n;
    }
    return gs;
  });
}

Tensor expand(const Tensor& x, const Shape& shape) {
  // The tape's sum_to undoes the broadcast, so the gradient passes through unchanged.
  return record("expand", x.expand(shape), {x}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

Tensor contiguous(const Tensor& x) {
  // Already contiguous: x itself (recording an op whose output is its own input would drop the gradient).
  if (x.is_contiguous()) return x;
  return record("contiguous", ops::contiguous(x), {x}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

// k or v heads (B, T, Hkv, D) -> (B, T, Hkv * rep, D), kv head j serving query heads j*rep .. j*rep + rep - 1
// (grouped-query attention). Built from expand + reshape: the backward sums each group's gradients.
Tensor repeat_kv(const Tensor& x, int64_t rep) {
  if (rep == 1) return x;
  const int64_t B = x.size(0), T = x.size(1), Hkv = x.size(2), D = x.size(3);
  return reshape(expand(reshape(x, {B, T, Hkv, 1, D}), {B, T, Hkv, rep, D}), {B, T, Hkv * rep, D});
}

}  // namespace alpha::ag
