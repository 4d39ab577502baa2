// TODO(helper): implement; stub so the tree links.
#include "core/cpu/dropout.h"
namespace alpha::cpu {
Tensor dropout(const Tensor&, double, uint64_t, uint64_t) { throw Error("[dropout] not implemented"); }
}
