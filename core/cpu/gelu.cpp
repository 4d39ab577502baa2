// TODO(helper): implement; stub so the tree links.
#include "core/cpu/gelu.h"
namespace alpha::cpu {
Tensor gelu(const Tensor&) { throw Error("[gelu] not implemented"); }
Tensor gelu_backward(const Tensor&, const Tensor&) { throw Error("[gelu] not implemented"); }
}
