// TODO(helper): implement; stub so the tree links.
#include "core/cpu/embedding.h"
namespace alpha::cpu {
Tensor embedding(const Tensor&, const Tensor&) { throw Error("[embedding] not implemented"); }
Tensor embedding_backward(const Tensor&, const Tensor&, int64_t) { throw Error("[embedding] not implemented"); }
}
