// TODO(helper): implement; stub so the tree links.
#include "core/cpu/layernorm.h"
namespace alpha::cpu {
ops::LayerNormOut layernorm(const Tensor&, const Tensor&, const Tensor&, double) { throw Error("[layernorm] not implemented"); }
ops::LayerNormGrads layernorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool) { throw Error("[layernorm] not implemented"); }
}
