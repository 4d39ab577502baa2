// Element-wise ops on the GPU: same-shape or trailing-vector/scalar broadcast binaries, unary maps and the
// affine x*mul+add. The vec4 variants run when every length is a multiple of 4 (f32 only); f16 tensors run the
// f16-storage variants (f32 math) and give f16 results.
#include <cstring>

#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

namespace {

// How operand x indexes the output `out`: n when same shape, numel(x) when x (minus leading 1s) equals the
// trailing dims of out (then element i reads x[i % numel]); 0 when this broadcast is not supported.
int64_t modulus(const Shape& x, const Shape& out) {
  if (x == out) return shape_numel(out);
  size_t lead = 0;
  while (lead < x.size() && x[lead] == 1) ++lead;
  const size_t k = x.size() - lead;
  if (k > out.size()) return 0;
  for (size_t i = 0; i < k; ++i)
    if (x[lead + i] != out[out.size() - k + i]) return 0;
  return shape_numel(x);
}

}  // namespace

Tensor VulkanBackend::binary(uint32_t op, const Tensor& a, const Tensor& b) {
  if (!flt(a, b)) return {};
  const bool h = a.dtype() == DType::f16;
  const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), "binary");
  const int64_t n = shape_numel(out_shape), an = modulus(a.shape(), out_shape), bn = modulus(b.shape(), out_shape);
  if (an == 0 || bn == 0 || n == 0) return {};
  const auto ba = rt_->input(a), bb = rt_->input(b);
  Tensor out = rt_->output(out_shape, a.dtype());
  const bool v4 = n % 4 == 0 && an % 4 == 0 && bn % 4 == 0;  // f16 too: 8-byte f16vec4 loads, same bits
  const uint32_t d = v4 ? 4 : 1;
  const pc::BinaryPC pc{uint32_t(n / d), uint32_t(an / d), uint32_t(bn / d), 0};
  const std::string kernel = std::string(h ? "binary_f16" : "binary_f32") + (v4 ? "_vec4" : "");
  const uint64_t invocations = h && v4 ? (uint64_t{pc.n} + 1) / 2 : pc.n;  // f16 vec4: two vectors each
  rt_->run(kernel, {256, op}, {{ba, false}, {bb, false}, {Runtime::buffer_of(out), true}}, pc,
           Runtime::grid_for(invocations, 256), double(n));
  return out;
}

namespace {
Tensor run_unary(Runtime& rt, uint32_t op, const Tensor& x, float mul, float add) {
  const auto bx = rt.input(x);
  Tensor out = rt.output(x.shape(), x.dtype());
  const int64_t n = x.numel();
  const bool h = x.dtype() == DType::f16, v4 = !h && n % 4 == 0;
  const pc::UnaryPC pc{uint32_t(v4 ? n / 4 : n), mul, add, 0};
  rt.run(h ? "unary_f16" : v4 ? "unary_f32_vec4" : "unary_f32", {256, op}, {{bx, false}, {Runtime::buffer_of(out), true}}, pc,
         Runtime::grid_for(pc.n, 256), double(n));
  return out;
}
}  // namespace

Tensor VulkanBackend::unary(const char* op, const Tensor& x) {
  if (!flt(x)) return {};
  static constexpr const char* kOps[] = {"neg", "exp", "log", "sqrt"};  // = the shader's OP codes
  for (uint32_t i = 0; i < 4; ++i)
    if (std::strcmp(op, kOps[i]) == 0) return run_unary(*rt_, i, x, 1.0f, 0.0f);
  return {};
}

Tensor VulkanBackend::scale(const Tensor& x, double mul, double add) {
  if (!flt(x)) return {};
  // Same rounding as the CPU's f32 affine: the scalars are rounded to float first.
  return run_unary(*rt_, 4, x, static_cast<float>(mul), static_cast<float>(add));
}

Tensor VulkanBackend::sum(const Tensor& x, int64_t dim, bool keepdim) { return sum_out(x, dim, keepdim, x.dtype()); }

Tensor VulkanBackend::sum_f32(const Tensor& x, int64_t dim) { return sum_out(x, dim, false, DType::f32); }

Tensor VulkanBackend::sum_out(const Tensor& x, int64_t dim, bool keepdim, DType out_dtype) {
  if (!flt(x)) return {};
  const Shape& s = x.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= s[i];
  for (int64_t i = dim + 1; i < x.dim(); ++i) inner *= s[i];
  const int64_t n = s[dim];
  Shape rs = s;
  if (keepdim) rs[dim] = 1;
  else rs.erase(rs.begin() + dim);
  if (outer * inner == 0 || n == 0) return {};
  const auto bx = rt_->input(x);
  const bool h = x.dtype() == DType::f16;
  Tensor out = rt_->output(rs, out_dtype);
  // f16 out: f32 accumulation into a scratch buffer, then one rounding to f16.
  const bool h_out = out_dtype == DType::f16;
  const auto acc = h_out ? rt_->scratch(uint64_t(outer * inner) * 4) : Runtime::buffer_of(out);
  record_sum(bx, acc, uint32_t(outer), uint32_t(n), uint32_t(inner), 1.0f, h);
  if (h_out) record_cast(acc, Runtime::buffer_of(out), uint32_t(outer * inner), true);
  return out;
}

}  // namespace alpha::vk
