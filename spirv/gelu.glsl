// GELU, tanh approximation (GPT-2): y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), and its derivative;
// shared by gelu.comp and the GELU epilogues of matmul_cm.comp. u is clamped to +-10 (tanh rounds to +-1 in f32
// there), as on the CPU, so exp-based tanh cannot overflow.
// gelu_grad: 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2); the second term is 0 where u is
// clamped (also for u = +-inf from an overflowing x^3, which would otherwise give 0 * inf).
const float GELU_K0 = 0.7978845608028654;  // sqrt(2/pi)
const float GELU_K1 = 0.044715;
const float GELU_LIM = 10.0;  // core/cpu/gelu.cpp's f32 clamp

float gelu_grad(float v) {
  const float u = GELU_K0 * (v + GELU_K1 * v * v * v);
  const float t = tanh(clamp(u, -GELU_LIM, GELU_LIM));
  float d = 0.5 * (1.0 + t);
  if (abs(u) < GELU_LIM) d += 0.5 * v * (1.0 - t * t) * GELU_K0 * (1.0 + 3.0 * GELU_K1 * v * v);
  return d;
}
float gelu(float v) { return 0.5 * v * (1.0 + tanh(clamp(GELU_K0 * (v + GELU_K1 * v * v * v), -GELU_LIM, GELU_LIM))); }
