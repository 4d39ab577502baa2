// Deterministic counter-based RNG (Philox4x32-10). The whole state is (seed, position): saving those two
// integers saves the stream exactly, and a GPU kernel can compute the same numbers from the same pair.
#pragma once
#include <array>
#include <cstdint>

namespace alpha {

// One Philox4x32-10 block: 4 random words for a 128-bit counter under a 64-bit key.
std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter);

// The u32 at stream position p (word p % 4 of block p / 4): shared definition for CPU and GPU kernels.
inline uint32_t philox_at(uint64_t key, uint64_t p) { return philox4x32(key, p >> 2)[p & 3]; }

// u32 -> float in [0, 1) with 24 random bits (exactly representable, identical everywhere).
inline float u32_to_unit(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }

struct RngState {
  uint64_t seed = 0;
  uint64_t position = 0;  // next stream position (in u32 words)
  bool operator==(const RngState&) const = default;
};

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_{seed, 0} {}
  uint32_t next_u32() { return philox_at(state_.seed, state_.position++); }
  float uniform() { return u32_to_unit(next_u32()); }   // [0, 1)
  double normal();                                      // N(0, 1), Box-Muller on two draws
  uint64_t below(uint64_t n);                           // uniform integer in [0, n), unbiased
  // Hands out `n` positions for a kernel (dropout) and returns the first; the kernel reads philox_at.
  uint64_t reserve(uint64_t n) {
    const uint64_t p = state_.position;
    state_.position += n;
    return p;
  }
  uint64_t seed() const { return state_.seed; }
  const RngState& state() const { return state_; }
  void set_state(const RngState& s) { state_ = s; }

 private:
  RngState state_;
};

}  // namespace alpha
