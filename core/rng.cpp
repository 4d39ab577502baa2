#include "core/rng.h"

#include <cmath>

namespace alpha {

std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter) {
  // Constants from Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC'11).
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = static_cast<uint64_t>(M0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(M1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c0 = n0;
    c1 = static_cast<uint32_t>(p1);
    c2 = n2;
    c3 = static_cast<uint32_t>(p0);
    k0 += W0;
    k1 += W1;
  }
  return {c0, c1, c2, c3};
}

double Rng::normal() {
  // 1 - u keeps the log argument in (0, 1].
  const double u1 = 1.0 - static_cast<double>(uniform());
  const double u2 = static_cast<double>(uniform());
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

uint64_t Rng::below(uint64_t n) {
  if (n <= 1) return 0;
  // Rejection on 64-bit draws removes modulo bias.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  while (true) {
    const uint64_t x = (static_cast<uint64_t>(next_u32()) << 32) | next_u32();
    if (x < limit) return x % n;
  }
}

}  // namespace alpha
