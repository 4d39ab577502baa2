// TODO(helper): implement; stub so the tree links.
#include "core/cpu/softmax.h"
namespace alpha::cpu {
Tensor softmax(const Tensor&, bool) { throw Error("[softmax] not implemented"); }
Tensor softmax_backward(const Tensor&, const Tensor&) { throw Error("[softmax] not implemented"); }
}
