#include "core/cpu/copy.h"

#include <cstring>

#include "core/cpu/strided.h"

namespace alpha::cpu {

namespace {

template <class T> double load(const T* p) { return static_cast<double>(*p); }
template <> double load<uint16_t>(const uint16_t* p) { return f16_to_f32(*p); }
template <class T> void store(T* p, double v) { *p = static_cast<T>(v); }
template <> void store<uint16_t>(uint16_t* p, double v) { *p = f32_to_f16(static_cast<float>(v)); }

// Rows split over the pool when they write disjoint memory (par): each element is one load and store either way.
template <class D, class S>
void copy_typed(D* dst, const Shape& dshape, const Shape& dst_strides, const S* src, const Shape& src_strides,
                bool par) {
  auto row = [&](const std::array<int64_t, 2>& o, int64_t n, const std::array<int64_t, 2>& s) {
    D* d = dst + o[0];
    const S* x = src + o[1];
    if constexpr (std::is_same_v<D, S>) {
      if (s[0] == 1 && s[1] == 1) {
        std::memcpy(d, x, static_cast<size_t>(n) * sizeof(D));
        return;
      }
      for (int64_t i = 0; i < n; ++i) d[i * s[0]] = x[i * s[1]];
    } else {
      for (int64_t i = 0; i < n; ++i) store(d + i * s[0], load(x + i * s[1]));
    }
  };
  if (par) parallel_rows<2>(dshape, {&dst_strides, &src_strides}, {0, 0}, row);
  else for_each_row<2>(dshape, {&dst_strides, &src_strides}, {0, 0}, row);
}

template <class D>
void copy_from_any(D* dst, const Tensor& dt, const Tensor& src) {
  switch (src.dtype()) {
    case DType::f32:
      return copy_typed(dst, dt.shape(), dt.strides(), src.data<float>(), src.strides(), rows_disjoint(dt));
    case DType::f64:
      return copy_typed(dst, dt.shape(), dt.strides(), src.data<double>(), src.strides(), rows_disjoint(dt));
    case DType::f16:
      return copy_typed(dst, dt.shape(), dt.strides(), src.data<uint16_t>(), src.strides(), rows_disjoint(dt));
    case DType::i32:
      return copy_typed(dst, dt.shape(), dt.strides(), src.data<int32_t>(), src.strides(), rows_disjoint(dt));
  }
}

}  // namespace

void copy(Tensor& dst, const Tensor& src) {
  ALPHA_CHECK(dst.shape() == src.shape(), ShapeError, "[copy] destination {} and source {} differ", dst.str(),
              src.str());
  if (dst.numel() == 0) return;
  switch (dst.dtype()) {
    case DType::f32: return copy_from_any(dst.mutable_data<float>(), dst, src);
    case DType::f64: return copy_from_any(dst.mutable_data<double>(), dst, src);
    case DType::f16: return copy_from_any(dst.mutable_data<uint16_t>(), dst, src);
    case DType::i32: return copy_from_any(dst.mutable_data<int32_t>(), dst, src);
  }
}

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  Shape shape = xs.at(0).shape();
  shape[dim] = 0;
  for (const Tensor& x : xs) shape[dim] += x.size(dim);
  Tensor out = Tensor::empty(shape, xs[0].dtype());
  int64_t at = 0;
  for (const Tensor& x : xs) {  // each input into its window of out
    Tensor win = out.narrow(dim, at, x.size(dim));
    copy(win, x);
    at += x.size(dim);
  }
  return out;
}

void fill(Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  auto run = [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    for_each_row<1>(dst.shape(), {&dst.strides()}, {0},
                    [&](const std::array<int64_t, 1>& o, int64_t n, const std::array<int64_t, 1>& s) {
                      for (int64_t i = 0; i < n; ++i) store(p + o[0] + i * s[0], value);
                    });
    (void)sizeof(T);
  };
  switch (dst.dtype()) {
    case DType::f32: return run(dst.mutable_data<float>());
    case DType::f64: return run(dst.mutable_data<double>());
    case DType::f16: return run(dst.mutable_data<uint16_t>());
    case DType::i32: return run(dst.mutable_data<int32_t>());
  }
}

}  // namespace alpha::cpu
