// Rotary position embedding: a rotation per (position, channel pair), so the backward is the inverse rotation
// of the gradient. The cos/sin tables are constants (no gradient).
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t pos0, int64_t rot_heads) {
  const Tensor y = ops::rope(x, cos, sin, pos0, false, rot_heads);
  return record("rope", y, {x}, [cos, sin, pos0, rot_heads](const Tensor& g) {
    return std::vector<Tensor>{ops::rope(g, cos, sin, pos0, /*inverse=*/true, rot_heads)};  // copied heads: g as is
  });
}

}  // namespace alpha::ag
