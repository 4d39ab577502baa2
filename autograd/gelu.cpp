// TODO(helper): implement; stub so the tree links.
#include "autograd/ops.h"
