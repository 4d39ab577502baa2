// GPU cross-entropy, embedding and dropout against reference loops that follow core/ops.h (the CPU kernels
// for these are stubs in this tree). Dropout must reproduce the CPU's Philox mask bit for bit.
//
// Dimension legend: N rows, V vocabulary/classes, C channels.
#include <cmath>

#include "core/rng.h"
#include "tests/vk_test_util.h"

using namespace alpha;
using namespace alpha::vktest;

TEST_CASE("vk cross-entropy forward and backward match the reference, ignore_index included") {
  GpuScope g;
  struct Case {
    int64_t N, V;
  };
  // V % 4 == 0 (300, 2052) reads 4 logits per load; 2052 gives each invocation several quads (running-max updates).
  for (const Case c : {Case{1, 1}, Case{3, 17}, Case{17, 65}, Case{5, 300}, Case{3, 2052}, Case{4, 3}}) {
    // The last case has large logits: lse near 1e3 must survive the f32 <-> f64 bit conversion.
    const Tensor logits = c.V == 3 ? randn({c.N, c.V}, 53, 1000.0) : randn({c.N, c.V}, 50, 3.0);
    Rng rng(51);
    std::vector<int32_t> t(static_cast<size_t>(c.N));
    for (auto& x : t) x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.V)));
    if (c.N > 2) t[1] = -1;  // ignored row
    const Tensor targets = Tensor::from_vector(t, {c.N});
    const auto out = on_gpu([&] { return ops::cross_entropy(logits, targets, -1); });
    const auto lv = logits.to_f64_vector();
    std::vector<double> lse(c.N), dx(lv.size(), 0.0);
    double total = 0;
    int64_t count = 0;
    for (int64_t r = 0; r < c.N; ++r) {
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < c.V; ++j) m = std::max(m, lv[r * c.V + j]);
      for (int64_t j = 0; j < c.V; ++j) s += std::exp(lv[r * c.V + j] - m);
      lse[r] = m + std::log(s);
      if (t[r] != -1) total += lse[r] - lv[r * c.V + t[r]], ++count;
    }
    const double dloss = 0.75;
    for (int64_t r = 0; r < c.N; ++r)
      for (int64_t j = 0; j < c.V && t[r] != -1; ++j)
        dx[r * c.V + j] = dloss * (std::exp(lv[r * c.V + j] - lse[r]) - (j == t[r] ? 1.0 : 0.0)) / count;
    const std::string what = fmt::format("N={} V={}", c.N, c.V);
    CHECK(out.count == count);
    expect_close(out.loss, std::vector<double>{total / count}, {}, 1e-5, 1e-6, what + " loss");
    CHECK(out.lse.dtype() == DType::f64);  // core/ops.h: lse is f64 whatever the backend
    expect_close(out.lse, lse, {c.N}, 1e-5, 1e-6, what + " lse");
    const Tensor d = on_gpu([&] { return ops::cross_entropy_backward(logits, targets, out.lse, dloss, count, -1); });
    expect_close(d, dx, {c.N, c.V}, 1e-4, 1e-6, what + " dlogits");
    // An lse made on the host (as the CPU forward makes it) works for the GPU backward too.
    const Tensor host_lse = Tensor::from_vector(lse, {c.N});
    const Tensor d2 = on_gpu([&] { return ops::cross_entropy_backward(logits, targets, host_lse, dloss, count, -1); });
    expect_close(d2, dx, {c.N, c.V}, 1e-4, 1e-6, what + " dlogits (host lse)");
  }
  expect_clean();
}

TEST_CASE("vk cross-entropy: a NaN logit makes the loss NaN (scalar and 4-wide rows)") {
  GpuScope g;
  for (const int64_t V : {17, 300}) {
    std::vector<float> v(static_cast<size_t>(2 * V), 0.5f);
    v[static_cast<size_t>(V + 7)] = std::nanf("");  // row 1
    const Tensor logits = Tensor::from_vector(v, {2, V});
    const Tensor targets = Tensor::from_vector(std::vector<int32_t>{1, 2}, {2});
    const auto out = on_gpu([&] { return ops::cross_entropy(logits, targets, -1); });
    CHECK(std::isnan(out.loss.item()));
    const auto lse = out.lse.to_f64_vector();
    CHECK(std::abs(lse[0] - (0.5 + std::log(double(V)))) < 1e-5);  // the clean row is untouched
    CHECK(std::isnan(lse[1]));
  }
  expect_clean();
}

TEST_CASE("vk cross-entropy declines an out-of-range target so the CPU kernel reports it") {
  GpuScope g;
  const Tensor logits = randn({2, 3}, 52);
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{0, 3}, {2});
  const int64_t before = dispatch_stats().gpu_ops;
  CHECK_THROWS(ops::cross_entropy(logits, targets, -1));  // the CPU kernel's error (or its stub's)
  CHECK(dispatch_stats().gpu_ops == before);
  expect_clean();
}

TEST_CASE("vk embedding gather and deterministic backward match the reference (repeated indices)") {
  GpuScope g;
  for (const int64_t V : {1, 3, 17}) {
    for (const int64_t C : {1, 5, 65}) {
      const Tensor w = randn({V, C}, 60);
      Rng rng(61);
      std::vector<int32_t> iv(2 * 7);
      for (auto& x : iv) x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)));
      const Tensor idx = Tensor::from_vector(iv, {2, 7});
      const auto wv = w.to_f64_vector();
      std::vector<double> want;
      for (int32_t i : iv) want.insert(want.end(), wv.begin() + i * C, wv.begin() + (i + 1) * C);
      const std::string what = fmt::format("V={} C={}", V, C);
      expect_close(on_gpu([&] { return ops::embedding(w, idx); }), want, {2, 7, C}, 0, 0, what);
      const Tensor dout = randn({2, 7, C}, 62);
      const auto dv = dout.to_f64_vector();
      std::vector<double> dw(static_cast<size_t>(V * C), 0.0);
      for (size_t k = 0; k < iv.size(); ++k)
        for (int64_t c = 0; c < C; ++c) dw[iv[k] * C + c] += dv[k * C + c];
      const Tensor d1 = on_gpu([&] { return ops::embedding_backward(dout, idx, V); });
      expect_close(d1, dw, {V, C}, 1e-6, 1e-6, what + " backward");
      // Deterministic: a second run gives the same bits.
      const Tensor d2 = on_gpu([&] { return ops::embedding_backward(dout, idx, V); });
      CHECK(d1.to_f32_vector() == d2.to_f32_vector());
    }
  }
  // Frequent rows (a character vocabulary's space; a comma in a 50K vocabulary): their runs are cut into segments
  // of kSegment positions, summed apart, then in order; rows no position uses get zeros.
  for (const int64_t V : {int64_t{5}, int64_t{3001}}) {
    const int64_t C = 33, n = 1500;
    std::vector<int32_t> iv(n);
    Rng rng(63);
    for (auto& x : iv) x = rng.below(10) < 8 ? 1 : static_cast<int32_t>(rng.below(static_cast<uint64_t>(V)));
    const Tensor idx = Tensor::from_vector(iv, {3, n / 3}), dout = randn({3, n / 3, C}, 64);
    const auto dv = dout.to_f64_vector();
    std::vector<double> dw(static_cast<size_t>(V * C), 0.0);
    for (size_t k = 0; k < iv.size(); ++k)
      for (int64_t c = 0; c < C; ++c) dw[iv[k] * C + c] += dv[k * C + c];
    const Tensor d1 = on_gpu([&] { return ops::embedding_backward(dout, idx, V); });
    expect_close(d1, dw, {V, C}, 1e-5, 1e-5, fmt::format("skewed rows backward, V={}", V));
    CHECK(d1.to_f32_vector() == on_gpu([&] { return ops::embedding_backward(dout, idx, V); }).to_f32_vector());
    // f16 dout: the same sums of the f16 values (f32 accumulation).
    const Tensor dh = dout.to(DType::f16);
    const Tensor d16 = on_gpu([&] { return ops::embedding_backward(dh, idx, V); });
    CHECK(d16.dtype() == DType::f32);
    expect_close(d16, on_cpu([&] { return ops::embedding_backward(dh, idx, V); }).to(DType::f32), 1e-5, 1e-5,
                 fmt::format("skewed rows backward, f16, V={}", V));
    // acc: the gradient added into it in place (only the used rows change) with the separate add's bits; an acc
    // that another tensor holds is left alone (a new sum), and on the CPU the add is the separate one.
    on_gpu([&] {
      const Tensor ref = ops::add(randn({V, C}, 65), ops::embedding_backward(dh, idx, V));
      Tensor acc = randn({V, C}, 65);
      const Storage* st = acc.storage().get();
      const Tensor got = ops::embedding_backward(dh, idx, V, acc);
      CHECK(got.storage().get() == st);
      CHECK(got.to_f32_vector() == ref.to_f32_vector());
      Tensor shared = randn({V, C}, 65);
      const Tensor other = shared;
      const Tensor got2 = ops::embedding_backward(dh, idx, V, shared);
      CHECK(got2.storage() != shared.storage());
      CHECK(got2.to_f32_vector() == ref.to_f32_vector());
      CHECK(other.to_f32_vector() == randn({V, C}, 65).to_f32_vector());
      return got;
    }, 5);  // ref's two ops, the fused one, the shared acc's two
    // An acc the kernel cannot bind (a view at an offset, held by nothing else): the GPU's plain gradient, then the add
    // (on the CPU: the backend binds no view at an offset either).
    Tensor big = randn({V + 1, C}, 67);
    Tensor view = big.narrow(0, 1, V);
    big = Tensor();
    REQUIRE(view.exclusive());
    const Tensor got3 = on_gpu([&] { return ops::embedding_backward(dh, idx, V, view); }, 1);
    CHECK(got3.storage() != view.storage());
    CHECK(got3.to_f32_vector() ==
          on_gpu([&] { return ops::add(view, ops::embedding_backward(dh, idx, V)); }, 1).to_f32_vector());
    const Tensor cpu_acc = on_cpu([&] { return ops::embedding_backward(dh, idx, V, randn({V, C}, 65)); });
    expect_close(cpu_acc, on_cpu([&] { return ops::add(randn({V, C}, 65), ops::embedding_backward(dh, idx, V)); }), 0,
                 0, "acc on the CPU");
    CHECK_THROWS_AS(ops::embedding_backward(dh, idx, V, randn({V, C + 1}, 66)), ShapeError);
  }
  expect_clean();
}

TEST_CASE("vk dropout reproduces the Philox mask of core/rng.h bit for bit") {
  GpuScope g;
  // Offsets cross a 4-word block boundary and the 2^32 carry into the high counter word.
  for (const uint64_t offset : {uint64_t{0}, uint64_t{3}, uint64_t{0xFFFFFFFEull}, uint64_t{0x100000005ull}}) {
    for (const double p : {0.0, 0.1, 0.5, 0.9}) {
      const Tensor x = randn({3, 17}, 70);
      const uint64_t seed = 0x1234567890ABCDEFull;
      const Tensor y = on_gpu([&] { return ops::dropout(x, p, seed, offset); });
      const auto xv = x.to_f32_vector(), yv = y.to_f32_vector();
      const float sc = static_cast<float>(1.0 / (1.0 - p));
      int kept = 0;
      for (size_t i = 0; i < xv.size(); ++i) {
        const bool keep = u32_to_unit(philox_at(seed, offset + i)) >= p;
        kept += keep;
        INFO("offset " << offset << " p " << p << " i " << i);
        if (keep) REQUIRE(yv[i] == doctest::Approx(xv[i] * sc).epsilon(1e-6));
        else REQUIRE(yv[i] == 0.0f);
      }
      if (p == 0.0) CHECK(kept == 51);
      if (p == 0.5) CHECK((kept > 10 && kept < 41));
    }
  }
  expect_clean();
}
