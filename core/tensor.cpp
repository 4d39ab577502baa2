#include "core/tensor.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/cpu/copy.h"

namespace alpha {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    ALPHA_CHECK(d >= 0, ShapeError, "[shape] negative dimension in {}", shape_str(s));
    ALPHA_CHECK(d == 0 || n <= std::numeric_limits<int64_t>::max() / d, ShapeError,
                "[shape] element count of {} overflows int64", shape_str(s));
    n *= d;
  }
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    ALPHA_CHECK(da == db || da == 1 || db == 1, ShapeError, "[{}] shapes do not broadcast: {} and {}", op,
                shape_str(a), shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

static int64_t wrap_dim(int64_t d, int64_t ndim, const char* op) {
  const int64_t w = d < 0 ? d + ndim : d;
  ALPHA_CHECK(w >= 0 && w < ndim, IndexError, "[{}] dim {} out of range for a {}-d tensor", op, d, ndim);
  return w;
}

Tensor Tensor::over(std::shared_ptr<Storage> st, const Shape& shape, DType dtype) {
  ALPHA_CHECK(st && st->nbytes() == static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype), ShapeError,
              "[tensor] a {} {} tensor does not cover a {}-byte storage", shape_str(shape), dtype_name(dtype),
              st ? st->nbytes() : 0);
  return make(std::move(st), shape, contiguous_strides(shape), 0, dtype);
}

Tensor Tensor::make(std::shared_ptr<Storage> st, Shape shape, Shape strides, int64_t offset, DType dt) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(st);
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dt;
  return Tensor(std::move(impl));
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  const int64_t n = shape_numel(shape);
  auto st = std::make_shared<Storage>(static_cast<size_t>(n) * dtype_size(dtype), /*zero_fill=*/false);
  return make(std::move(st), shape, contiguous_strides(shape), 0, dtype);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  const int64_t n = shape_numel(shape);
  auto st = std::make_shared<Storage>(static_cast<size_t>(n) * dtype_size(dtype), /*zero_fill=*/true);
  return make(std::move(st), shape, contiguous_strides(shape), 0, dtype);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  cpu::fill(t, value);
  return t;
}

template <class T>
static Tensor from_vec(const std::vector<T>& v, const Shape& shape) {
  ALPHA_CHECK(shape_numel(shape) == static_cast<int64_t>(v.size()), ShapeError,
              "[from_vector] {} values do not fill shape {}", v.size(), shape_str(shape));
  Tensor t = Tensor::empty(shape, dtype_of<T>::value);
  if (!v.empty()) std::memcpy(t.mutable_data<T>(), v.data(), v.size() * sizeof(T));
  return t;
}
Tensor Tensor::from_vector(const std::vector<float>& v, const Shape& s) { return from_vec(v, s); }
Tensor Tensor::from_vector(const std::vector<double>& v, const Shape& s) { return from_vec(v, s); }
Tensor Tensor::from_vector(const std::vector<int32_t>& v, const Shape& s) { return from_vec(v, s); }

const Shape& Tensor::shape() const { return impl_->shape; }
const Shape& Tensor::strides() const { return impl_->strides; }
int64_t Tensor::offset() const { return impl_->offset; }
DType Tensor::dtype() const { return impl_->dtype; }
int64_t Tensor::numel() const { return shape_numel(impl_->shape); }
const std::shared_ptr<Storage>& Tensor::storage() const { return impl_->storage; }
int64_t Tensor::size(int64_t d) const { return impl_->shape[wrap_dim(d, dim(), "size")]; }
std::string Tensor::str() const {
  return defined() ? std::string(dtype_name(dtype())) + shape_str(shape()) : "undefined";
}

bool Tensor::is_contiguous() const {
  int64_t expect = 1;
  for (size_t i = impl_->shape.size(); i-- > 0;) {
    if (impl_->shape[i] == 1) continue;  // stride of a size-1 dim never matters
    if (impl_->strides[i] != expect) return false;
    expect *= impl_->shape[i];
  }
  return true;
}

void Tensor::check_dtype(DType want, const char* what) const {
  ALPHA_CHECK(defined(), DTypeError, "[{}] tensor is undefined", what);
  ALPHA_CHECK(impl_->dtype == want, DTypeError, "[{}] tensor is {}, accessed as {}", what,
              dtype_name(impl_->dtype), dtype_name(want));
}

Tensor Tensor::view(const Shape& shape_in) const {
  ALPHA_CHECK(is_contiguous(), ShapeError, "[view] tensor {} is not contiguous; use reshape", str());
  Shape s = shape_in;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      ALPHA_CHECK(infer < 0, ShapeError, "[view] more than one -1 in {}", shape_str(shape_in));
      infer = static_cast<int64_t>(i);
    } else {
      ALPHA_CHECK(s[i] >= 0, ShapeError, "[view] negative dimension in {}", shape_str(shape_in));
      known *= s[i];
    }
  }
  const int64_t n = numel();
  if (infer >= 0) {
    ALPHA_CHECK(known > 0 && n % known == 0, ShapeError, "[view] cannot view {} as {}", str(),
                shape_str(shape_in));
    s[infer] = n / known;
  }
  ALPHA_CHECK(shape_numel(s) == n, ShapeError, "[view] cannot view {} as {}", str(), shape_str(shape_in));
  return make(impl_->storage, s, contiguous_strides(s), impl_->offset, impl_->dtype);
}

Tensor Tensor::reshape(const Shape& shape) const { return is_contiguous() ? view(shape) : contiguous().view(shape); }

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  Shape sh = impl_->shape, st = impl_->strides;
  std::swap(sh[d0], sh[d1]);
  std::swap(st[d0], st[d1]);
  return make(impl_->storage, sh, st, impl_->offset, impl_->dtype);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  ALPHA_CHECK(static_cast<int64_t>(dims.size()) == dim(), ShapeError, "[permute] {} dims given for {}",
              dims.size(), str());
  Shape sh(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute");
    ALPHA_CHECK(!seen[d], ShapeError, "[permute] dim {} repeated", d);
    seen[d] = true;
    sh[i] = impl_->shape[d];
    st[i] = impl_->strides[d];
  }
  return make(impl_->storage, sh, st, impl_->offset, impl_->dtype);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim(d, dim(), "narrow");
  ALPHA_CHECK(start >= 0 && length >= 0 && start + length <= impl_->shape[d], IndexError,
              "[narrow] range [{}, {}) outside dim {} of size {}", start, start + length, d, impl_->shape[d]);
  Shape sh = impl_->shape;
  sh[d] = length;
  return make(impl_->storage, sh, impl_->strides, impl_->offset + start * impl_->strides[d], impl_->dtype);
}

Tensor Tensor::expand(const Shape& shape) const {
  ALPHA_CHECK(shape.size() >= impl_->shape.size(), ShapeError, "[expand] cannot expand {} to {}", str(),
              shape_str(shape));
  const size_t lead = shape.size() - impl_->shape.size();
  Shape st(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) continue;
    const int64_t have = impl_->shape[i - lead];
    ALPHA_CHECK(have == shape[i] || have == 1, ShapeError, "[expand] cannot expand {} to {}", str(),
                shape_str(shape));
    st[i] = have == 1 && shape[i] != 1 ? 0 : impl_->strides[i - lead];
  }
  return make(impl_->storage, shape, st, impl_->offset, impl_->dtype);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape sh = impl_->shape, st = impl_->strides;
  const int64_t stride = d < dim() ? impl_->strides[d] * impl_->shape[d] : 1;
  sh.insert(sh.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return make(impl_->storage, sh, st, impl_->offset, impl_->dtype);
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  ALPHA_CHECK(impl_->shape[d] == 1, ShapeError, "[squeeze] dim {} of {} is not 1", d, str());
  Shape sh = impl_->shape, st = impl_->strides;
  sh.erase(sh.begin() + d);
  st.erase(st.begin() + d);
  return make(impl_->storage, sh, st, impl_->offset, impl_->dtype);
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype());
  cpu::copy(out, *this);
  return out;
}

Tensor Tensor::to(DType dt) const {
  if (dt == dtype()) return *this;
  Tensor out = empty(shape(), dt);
  cpu::copy(out, *this);
  return out;
}

void Tensor::copy_from(const Tensor& src) { cpu::copy(*this, src.expand(shape())); }

double Tensor::item() const {
  ALPHA_CHECK(numel() == 1, ShapeError, "[item] tensor {} has {} elements, not 1", str(), numel());
  return to_f64_vector()[0];
}

std::vector<double> Tensor::to_f64_vector() const {
  Tensor c = to(DType::f64).contiguous();
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

std::vector<float> Tensor::to_f32_vector() const {
  Tensor c = to(DType::f32).contiguous();
  const float* p = c.data<float>();
  return std::vector<float>(p, p + c.numel());
}

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }
Tensor& Tensor::set_requires_grad(bool r) {
  ALPHA_CHECK(!r || is_float(dtype()), DTypeError, "[requires_grad] {} tensor cannot require grad",
              dtype_name(dtype()));
  impl_->requires_grad = r;
  return *this;
}
Tensor Tensor::grad() const { return impl_->grad ? Tensor(impl_->grad) : Tensor(); }
void Tensor::set_grad(const Tensor& g) { impl_->grad = g.impl_; }
bool Tensor::is_leaf() const { return impl_->is_leaf; }
void Tensor::set_is_leaf(bool leaf) { impl_->is_leaf = leaf; }
const std::string& Tensor::name() const { return impl_->name; }
Tensor& Tensor::set_name(std::string n) {
  impl_->name = std::move(n);
  return *this;
}

}  // namespace alpha
