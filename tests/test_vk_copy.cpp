// GPU strided copies (contiguous() of views, narrow's backward, cat, matmul operands in other layouts), the
// ALPHA_VK_CHECK debug mode and the counters snapshot for the metrics stream.
//
// Dimension legend: B batch, T time, H heads, D head dim, C channels.
#include <string>

#include "tests/vk_test_util.h"

using namespace alpha;
using namespace alpha::vktest;

namespace {
// A tensor whose data lives only on the GPU (the output of a GPU op); the active backend is left as it was.
Tensor gpu_tensor(const Shape& s, uint64_t seed) {
  Backend* prev = active_backend();
  gpu().set_threshold(OpClass::elementwise, 0);
  set_active_backend(&gpu());
  const Tensor t = ops::scale(randn(s, seed), 1.0);
  set_active_backend(prev);
  REQUIRE(t.storage()->device() != nullptr);
  REQUIRE(!t.storage()->host_valid());
  return t;
}

// Exact comparison of a GPU contiguous copy of `view` with the CPU's clone.
void expect_gpu_copy(const Tensor& view, const std::string& what) {
  GpuScope g;
  const Tensor got = on_gpu([&] { return ops::contiguous(view); });
  CHECK_MESSAGE(got.is_contiguous(), what);
  CHECK(got.storage() != view.storage());
  expect_close(got, on_cpu([&] { return view.clone(); }), 0, 0, what);
}
}  // namespace

TEST_CASE("vk contiguous copies views exactly: transposes, permutes, narrows with offsets, expands, 6-d, i32") {
  const Tensor x = randn({2, 17, 3, 5}, 100);  // (B, T, H, D)
  expect_gpu_copy(x.transpose(1, 2), "transpose(1, 2)");
  expect_gpu_copy(x.permute({3, 1, 0, 2}), "permute");
  expect_gpu_copy(x.narrow(1, 4, 9).transpose(0, 3), "narrow(1, 4, 9) with offset, transposed");
  // Attention heads: q, k, v of (B, T, 3, H, D), each as (B, H, T, D) at offsets 0, H*D, 2*H*D.
  const Tensor qkv = gpu_tensor({2, 7, 3, 3, 4}, 101);
  for (int i = 0; i < 3; ++i) expect_gpu_copy(qkv.narrow(2, i, 1).squeeze(2).transpose(1, 2), "head " + std::to_string(i));
  expect_gpu_copy(randn({1, 5}, 102).expand({4, 5}), "expand (stride 0)");
  expect_gpu_copy(randn({2, 3, 1, 4, 2, 3}, 103).permute({5, 4, 3, 2, 1, 0}), "6-d permute");
  std::vector<int32_t> iv(6 * 5);
  for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<int32_t>(i * 7) - 40;
  expect_gpu_copy(Tensor::from_vector(iv, {6, 5}).transpose(0, 1), "i32 transpose");
  expect_clean();
}

TEST_CASE("vk contiguous stays where the data is: GPU-resident views copy on the GPU below the threshold") {
  const Tensor dev = gpu_tensor({33, 65}, 104).transpose(0, 1);
  const Tensor host = randn({33, 65}, 105).transpose(0, 1);
  gpu().set_threshold(OpClass::elementwise, int64_t{1} << 40);  // nothing is big enough
  set_active_backend(&gpu());
  const int64_t g0 = dispatch_stats().gpu_ops, c0 = dispatch_stats().cpu_ops;
  const Tensor a = ops::contiguous(dev);
  CHECK(dispatch_stats().gpu_ops == g0 + 1);
  const Tensor b = ops::contiguous(host);
  CHECK(dispatch_stats().cpu_ops == c0 + 1);
  CHECK(!b.storage()->device());  // the host copy never went to the GPU
  set_active_backend(nullptr);
  gpu().set_threshold(OpClass::elementwise, 0);
  expect_close(a, dev.clone(), 0, 0, "resident copy");
  expect_close(b, host.clone(), 0, 0, "host copy");
  const Tensor c = ops::contiguous(dev);  // no backend: CPU clone of GPU data still works
  expect_close(c, dev.clone(), 0, 0, "no backend");
  expect_clean();
}

TEST_CASE("vk narrow backward places the gradient into zeros at every dim and offset") {
  const Shape xs{3, 5, 12};
  for (int64_t dim = 0; dim < 3; ++dim)
    for (int64_t start : {int64_t{0}, int64_t{1}, xs[dim] - 2}) {
      Shape gs = xs;
      gs[dim] = 2;
      for (bool strided : {false, true}) {
        // A strided gradient: the transpose of a contiguous tensor (as autograd hands them over).
        const Tensor g = strided ? randn({gs[2], gs[1], gs[0]}, 106 + dim).permute({2, 1, 0}) : randn(gs, 107 + dim);
        GpuScope scope;
        const Tensor got = on_gpu([&] { return ops::narrow_backward(g, xs, dim, start); });
        const Tensor want = on_cpu([&] { return ops::narrow_backward(g, xs, dim, start); });
        expect_close(got, want, 0, 0, fmt::format("dim {} start {} strided {}", dim, start, strided));
        // The CPU result itself: the window holds g, the rest is 0 (so the total mass is g's).
        double total = 0, window = 0;
        for (double v : want.to_f64_vector()) total += std::fabs(v);
        for (double v : g.to_f64_vector()) window += std::fabs(v);
        CHECK(total == doctest::Approx(window));
      }
    }
  CHECK_THROWS_AS(ops::narrow_backward(randn({2, 3}, 1), {2, 4}, 1, 2), ShapeError);
  expect_clean();
}

TEST_CASE("vk cat joins views along every dim into one output exactly (f32, f16, i32; GPU-resident inputs)") {
  const Tensor a = randn({3, 5, 4}, 110), b = randn({5, 2, 4}, 111).transpose(0, 1);  // b: (2, 5, 4) strided
  const Tensor dev = gpu_tensor({7, 4, 5}, 112);                                      // lives on the GPU only
  struct Case {
    std::vector<Tensor> xs;
    int64_t dim;
    const char* what;
  };
  const std::vector<Case> cases{
      {{a.narrow(0, 0, 2), b, a.narrow(0, 1, 1)}, 0, "dim 0, offset views (q/k/v weights)"},
      {{a, a.narrow(1, 1, 2), randn({3, 1, 4}, 113)}, 1, "dim 1"},
      {{a, dev.narrow(0, 2, 3).transpose(1, 2)}, -1, "last dim, GPU view"},
      {{a.narrow(2, 1, 3)}, 2, "one input: a fresh copy"}};
  for (DType dt : {DType::f32, DType::f16})
    for (const Case& c : cases) {
      std::vector<Tensor> xs;
      for (const Tensor& x : c.xs) xs.push_back(dt == DType::f32 ? x : x.to(dt));
      GpuScope g;
      const Tensor got = on_gpu([&] { return ops::cat(xs, c.dim); });
      CHECK(got.dtype() == dt);
      CHECK(got.offset() == 0);
      expect_close(got, on_cpu([&] { return ops::cat(xs, c.dim); }), 0, 0, fmt::format("{} {}", dtype_name(dt), c.what));
    }
  std::vector<int32_t> iv(4 * 6);
  for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<int32_t>(i * 5) - 30;
  const Tensor it = Tensor::from_vector(iv, {4, 6});
  GpuScope g;
  expect_close(on_gpu([&] { return ops::cat({it.transpose(0, 1), it.narrow(1, 2, 3).transpose(0, 1)}, 0); }),
               on_cpu([&] { return ops::cat({it.transpose(0, 1), it.narrow(1, 2, 3).transpose(0, 1)}, 0); }), 0, 0,
               "i32");
  expect_clean();
}

TEST_CASE("vk matmul takes transposed and strided operands: flips or GPU copies, no CPU fallback") {
  GpuScope g;
  const Tensor qkv = gpu_tensor({2, 9, 3, 3, 4}, 110);  // (B, T, 3, H, D)
  auto head = [&](int i) { return qkv.narrow(2, i, 1).squeeze(2).transpose(1, 2); };  // (B, H, T, D) views
  const Tensor q = head(0), k = head(1), v = head(2);
  const int64_t c0 = dispatch_stats().cpu_ops;
  const Tensor att = ops::matmul(q, k, false, true);  // (B, H, T, T)
  const Tensor y = ops::matmul(att, v);               // (B, H, T, D)
  const Tensor w = randn({5, 4}, 111);
  const Tensor z = ops::matmul(w.transpose(0, 1), w);  // a transposed-contiguous operand: a flag flip
  CHECK(dispatch_stats().cpu_ops == c0);
  expect_close(att, on_cpu([&] { return ops::matmul(q, k, false, true); }), 1e-5, 1e-6, "q k^T");
  expect_close(y, on_cpu([&] { return ops::matmul(att, v); }), 1e-5, 1e-6, "att v");
  expect_close(z, on_cpu([&] { return ops::matmul(w.transpose(0, 1), w); }), 1e-5, 1e-6, "flip");
  expect_clean();
}

TEST_CASE("ALPHA_VK_CHECK mode: GPU results are re-run on the CPU; a wrong one throws naming op and shapes") {
  GpuScope g;
  set_gpu_check(true);
  struct Off {
    ~Off() { set_gpu_check(false); }
  } off;
  const Tensor a = randn({17, 33}, 120), b = randn({33, 5}, 121);
  CHECK_NOTHROW(ops::matmul(a, b));
  CHECK_NOTHROW(ops::layernorm(a, Tensor(), Tensor(), 1e-5));
  CHECK_NOTHROW(ops::contiguous(a.transpose(0, 1)));
  corrupt_next_gpu_result();
  try {
    ops::matmul(a, b);
    FAIL("the corrupted matmul was not reported");
  } catch (const GpuCheckError& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("[matmul]") != std::string::npos);
    CHECK(m.find("f32[17,33], f32[33,5]") != std::string::npos);
    CHECK(m.find("element 0") != std::string::npos);
  }
  corrupt_next_gpu_result();
  CHECK_THROWS_AS(ops::layernorm(a, Tensor(), Tensor(), 1e-5), GpuCheckError);
  CHECK_NOTHROW(ops::gelu(a));  // the hook fires once
  expect_clean();
}

TEST_CASE("device counters: ops per side and the queue's dispatches, submissions and bytes moved") {
  set_active_backend(nullptr);
  CHECK(device_counters().backend.empty());
  GpuScope g;
  const DeviceCounters before = device_counters();
  CHECK(before.backend == gpu().name());
  const Tensor x = randn({1000}, 130);
  const Tensor y = ops::exp(x);
  const auto v = y.to_f32_vector();  // a read-back: flush, wait, download
  const DeviceCounters after = device_counters();
  CHECK(after.gpu_ops == before.gpu_ops + 1);
  CHECK(after.queue.dispatches >= before.queue.dispatches + 1);
  CHECK(after.queue.submissions >= before.queue.submissions + 1);
  CHECK(after.queue.bytes_up >= before.queue.bytes_up + 4000);
  CHECK(after.queue.bytes_down >= before.queue.bytes_down + 4000);
  expect_clean();
}
