// Dropout: the mask is a pure function of (seed, offset), so the backward replays it by running the same
// dropout on the gradient. Nothing about the mask is stored.
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

Tensor dropout(const Tensor& x, double p, Rng& rng, bool training) {
  // Checked here too so a bad p never advances the RNG.
  ALPHA_CHECK(p >= 0.0 && p < 1.0, ValueError, "[dropout] p must be in [0, 1), got {}", p);
  if (p == 0.0 || !training) return x;  // identity, no RNG use
  const uint64_t seed = rng.seed();
  const uint64_t offset = rng.reserve(static_cast<uint64_t>(x.numel()));
  return record("dropout", ops::dropout(x, p, seed, offset), {x}, [p, seed, offset](const Tensor& g) {
    return std::vector<Tensor>{ops::dropout(g, p, seed, offset)};
  });
}

}  // namespace alpha::ag
