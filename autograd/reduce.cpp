// Reductions: the backward broadcasts the upstream gradient back over the reduced dim.
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

namespace {
int64_t wrap_dim(int64_t d, int64_t nd) { return d < 0 ? d + nd : d; }

// Re-inserts the reduced dim (size 1) so g broadcasts against the input.
Tensor unreduce(const Tensor& g, int64_t dim, bool keepdim) { return keepdim ? g : g.unsqueeze(dim); }
}  // namespace

Tensor sum(const Tensor& x, int64_t dim, bool keepdim) {
  Tensor y = ops::sum(x, dim, keepdim);
  const int64_t d = wrap_dim(dim, x.dim());
  const Shape xs = x.shape();
  return record("sum", y, {x}, [d, keepdim, xs](const Tensor& g) {
    return std::vector<Tensor>{unreduce(g, d, keepdim).expand(xs)};
  });
}

Tensor mean(const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = wrap_dim(dim, x.dim());
  ALPHA_CHECK(d >= 0 && d < x.dim() && x.size(d) > 0, ShapeError, "[mean] dim {} invalid or empty for {}", dim,
              x.str());
  return scale(sum(x, d, keepdim), 1.0 / static_cast<double>(x.size(d)));
}

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  // Not a structured binding: clang 14 (the fuzz build) cannot capture bindings in a lambda.
  const std::pair<Tensor, Tensor> vi = ops::max(x, dim, keepdim);
  const Tensor vals = vi.first, idx = vi.second;
  const int64_t d = wrap_dim(dim, x.dim());
  const Shape xs = x.shape();
  const DType dt = x.dtype();
  return record("max", vals, {x}, [d, keepdim, xs, dt, idx](const Tensor& g) {
    // Scatter g into the argmax positions (one per reduced row).
    Tensor gx = Tensor::zeros(xs, DType::f64);
    const Tensor gk = unreduce(g, d, keepdim).to(DType::f64).contiguous();
    const Tensor ik = unreduce(idx, d, keepdim).contiguous();
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < d; ++i) outer *= xs[i];
    for (size_t i = d + 1; i < xs.size(); ++i) inner *= xs[i];
    const int64_t n = xs[d];
    double* px = gx.mutable_data<double>();
    const double* pg = gk.data<double>();
    const int32_t* pi = ik.data<int32_t>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) px[(o * n + pi[o * inner + i]) * inner + i] = pg[o * inner + i];
    return std::vector<Tensor>{gx.to(dt)};
  });
}

Tensor sum_all(const Tensor& x) {
  const Shape xs = x.shape();
  return record("sum_all", ops::sum_all(x), {x}, [xs](const Tensor& g) { return std::vector<Tensor>{g.expand(xs)}; });
}

Tensor mean_all(const Tensor& x) {
  ALPHA_CHECK(x.numel() > 0, ShapeError, "[mean_all] tensor {} is empty", x.str());
  return scale(sum_all(x), 1.0 / static_cast<double>(x.numel()));
}

}  // namespace alpha::ag
