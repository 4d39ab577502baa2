// TODO(helper): implement; stub so the tree links.
#include "core/cpu/cross_entropy.h"
namespace alpha::cpu {
ops::CrossEntropyOut cross_entropy(const Tensor&, const Tensor&, int64_t) { throw Error("[cross_entropy] not implemented"); }
Tensor cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, double, int64_t, int64_t) { throw Error("[cross_entropy] not implemented"); }
}
