// Tensor: a strided view (shape, strides, offset, dtype) of shared Storage, plus autograd slots.
// Copying a Tensor copies the handle, not the data. View ops here record no gradients; the
// differentiable versions live in autograd/ops.h.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/storage.h"

namespace alpha {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);  // "[4,8]"
int64_t shape_numel(const Shape& s);    // throws ShapeError on negative dims or int64 overflow
Shape contiguous_strides(const Shape& s);
// NumPy broadcasting of two shapes; throws ShapeError naming `op` when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;

  // ---- creation (host) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);  // uninitialized contents
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32) { return full(shape, 1.0, dtype); }
  static Tensor scalar(double value, DType dtype = DType::f32) { return full({}, value, dtype); }
  static Tensor from_vector(const std::vector<float>& v, const Shape& shape);
  static Tensor from_vector(const std::vector<double>& v, const Shape& shape);
  static Tensor from_vector(const std::vector<int32_t>& v, const Shape& shape);

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t offset() const;
  DType dtype() const;
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const;
  std::string str() const;  // "f32[4,8]" for error messages

  // ---- views (share storage, no copy) ----
  Tensor view(const Shape& shape) const;      // needs contiguous; one dim may be -1
  Tensor reshape(const Shape& shape) const;   // view when possible, else contiguous copy
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor expand(const Shape& shape) const;    // size-1 dims (or new leading dims) get stride 0
  Tensor unsqueeze(int64_t d) const;
  Tensor squeeze(int64_t d) const;

  // ---- copies ----
  Tensor contiguous() const;  // returns *this when already contiguous
  Tensor clone() const;       // always a fresh contiguous copy
  Tensor to(DType dtype) const;
  void copy_from(const Tensor& src);  // same shape (src may broadcast); converts dtype

  // ---- host element access (syncs from the GPU when needed) ----
  // Pointer to the first element (storage + offset). data() reads; mutable_data() marks the GPU copy stale.
  template <class T> const T* data() const;
  template <class T> T* mutable_data();
  double item() const;                  // one-element tensor -> double
  std::vector<float> to_f32_vector() const;   // row-major values
  std::vector<double> to_f64_vector() const;

  // ---- autograd slots (used by autograd/) ----
  bool requires_grad() const;
  Tensor& set_requires_grad(bool r);
  Tensor grad() const;
  void set_grad(const Tensor& g);
  bool is_leaf() const;           // not produced by a recorded op
  void set_is_leaf(bool leaf);
  const std::string& name() const;
  Tensor& set_name(std::string n);

  // A contiguous tensor over all of st (st holds exactly shape's elements of dtype).
  static Tensor over(std::shared_ptr<Storage> st, const Shape& shape, DType dtype);

  // Identity: two handles to the same tensor (not merely the same storage).
  bool same(const Tensor& o) const { return impl_ == o.impl_; }
  const TensorImpl* impl() const { return impl_.get(); }
  // No other handle, view or tensor shares this one's storage: an op may write the result into it.
  bool exclusive() const;

 private:
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  static Tensor make(std::shared_ptr<Storage> st, Shape shape, Shape strides, int64_t offset, DType dt);
  void check_dtype(DType want, const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;  // in elements
  int64_t offset = 0;
  DType dtype = DType::f32;
  bool requires_grad = false;
  bool is_leaf = true;
  std::shared_ptr<TensorImpl> grad;
  std::string name;
};

inline bool Tensor::exclusive() const {
  return impl_ && impl_.use_count() == 1 && impl_->storage.use_count() == 1;
}

template <class T> const T* Tensor::data() const {
  check_dtype(dtype_of<T>::value, "data");
  return reinterpret_cast<const T*>(impl_->storage->host_read()) + impl_->offset;
}
template <class T> T* Tensor::mutable_data() {
  check_dtype(dtype_of<T>::value, "mutable_data");
  return reinterpret_cast<T*>(impl_->storage->host_write()) + impl_->offset;
}

}  // namespace alpha
