// Gradient clipping by global L2 norm, like torch.nn.utils.clip_grad_norm_ (on the CPU).
#pragma once
#include <vector>

#include "core/tensor.h"

namespace alpha {

// Global L2 norm over all defined grads (f32 or f64), accumulated in double in a fixed sequential order so it is
// deterministic. If max_norm > 0 and norm > max_norm, every defined grad is replaced out of place
// (p.set_grad(new tensor)) by grad * max_norm / (norm + 1e-6), like torch (which computes that coefficient
// in the grad's dtype; so do we). max_norm <= 0 disables clipping.
// A NaN norm clips nothing and is returned as is, so the caller can detect it and skip the step.
// Returns the pre-clip norm. Throws ValueError for a NaN max_norm, DTypeError for a non-float grad.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace alpha
