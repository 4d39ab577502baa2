// Dtype cast (f32 <-> f16 storage) with its backward: the gradient is cast back to the input's dtype.
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/ops.h"

namespace alpha::ag {

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;  // no new node: the gradient flows to x unchanged
  const DType from = x.dtype();
  // A leaf (a weight) keeps its f16 copy between steps while unwritten (ops::cast_cached).
  return record("cast", x.is_leaf() ? ops::cast_cached(x, dtype) : ops::cast(x, dtype), {x},
                [from](const Tensor& g) { return std::vector<Tensor>{ops::cast(g, from)}; });
}

}  // namespace alpha::ag
