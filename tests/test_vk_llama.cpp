// The Llama-style GPU kernels (vk/rmsnorm.cpp, vk/rope.cpp, vk/swiglu.cpp) against the CPU oracle
// (core/cpu/<op>.cpp) at awkward sizes, in f32 and f16 storage, and a tiny Llama (GQA, QK-norm, untied head)
// whose loss and every gradient on the GPU match the CPU's. Legend: N rows, C channels, B, T, H, D as usual.
#include <fmt/format.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "model/gpt.h"
#include "tests/train/model/llama_reference.h"
#include "tests/vk_test_util.h"

using namespace alpha;
using namespace alpha::vktest;

namespace {
// CPU result with f16 inputs follows the same storage rule (core/ops.h), so both sides round alike.
Tensor as(const Tensor& t, DType dt) { return t.defined() ? t.to(dt) : t; }
double tol(DType dt) { return dt == DType::f16 ? 4e-3 : 2e-5; }
}  // namespace

TEST_CASE("vk rmsnorm forward and backward match the CPU (odd widths, chunked dw, f32 and f16)") {
  GpuScope g;
  struct Case {
    int64_t N, C;
    bool w;
  };
  for (DType dt : {DType::f32, DType::f16})
    // C % 4 == 0 takes the 4-wide kernels (rows in registers up to 1024; 1500: scalar rows, dw in quads).
    for (const Case c : {Case{1, 1, true}, Case{3, 7, true}, Case{130, 33, true}, Case{5, 1500, true}, Case{9, 65, false},
                         Case{130, 64, true}, Case{3, 1024, true}, Case{4, 8, false}}) {
      const std::string what = fmt::format("{} N={} C={} w={}", dtype_name(dt), c.N, c.C, c.w);
      const Tensor x = as(randn({c.N, c.C}, 1), dt), w = c.w ? as(randn({c.C}, 2), dt) : Tensor();
      const Tensor dy = as(randn({c.N, c.C}, 3), dt);
      const auto gf = on_gpu([&] { return ops::rmsnorm(x, w, 1e-5); });
      const auto cf = on_cpu([&] { return ops::rmsnorm(x, w, 1e-5); });
      CHECK(gf.y.dtype() == dt);
      CHECK(gf.rstd.dtype() == DType::f32);
      expect_close(gf.y, cf.y, tol(dt), tol(dt), what + " y");
      expect_close(gf.rstd, cf.rstd, 1e-5, 1e-6, what + " rstd");
      const auto gb = on_gpu([&] { return ops::rmsnorm_backward(dy, x, w, gf.rstd); });
      const auto cb = on_cpu([&] { return ops::rmsnorm_backward(dy, x, w, cf.rstd); });
      expect_close(gb.dx, cb.dx, tol(dt), tol(dt), what + " dx");
      if (c.w) expect_close(gb.dw, cb.dw, 1e-4, 1e-4, what + " dw");
      CHECK(gb.dw.defined() == c.w);
    }
  expect_clean();
}

TEST_CASE("vk rmsnorm dw in fours gives the scalar kernel's bits (f32, f16)") {
  GpuScope g;
  // A column's dw depends on its x, dy and the rows' rstd only: (130, 8) in fours and the same data with a 9th
  // column (the scalar kernel), given the same rstd, agree bitwise over 3 row chunks.
  for (DType dt : {DType::f32, DType::f16}) {
    const Tensor x9 = as(randn({130, 9}, 4), dt), dy9 = as(randn({130, 9}, 5), dt), w9 = as(randn({9}, 6), dt);
    const auto first8 = [](const Tensor& t) { return ops::cat({t.narrow(-1, 0, 8)}, -1); };
    const Tensor x = first8(x9), dy = first8(dy9), w = first8(w9);
    const auto f = on_gpu([&] { return ops::rmsnorm(x, w, 1e-5); });
    const auto g4 = on_gpu([&] { return ops::rmsnorm_backward(dy, x, w, f.rstd); });
    const auto g1 = on_gpu([&] { return ops::rmsnorm_backward(dy9, x9, w9, f.rstd); });
    CHECK(g4.dw.to_f64_vector() == g1.dw.narrow(0, 0, 8).contiguous().to_f64_vector());
    CHECK(g4.dw.to_f64_vector() != std::vector<double>(8, 0.0));
  }
  expect_clean();
}

TEST_CASE("vk rope matches the CPU at offsets and inverse (f32 and f16)") {
  GpuScope g;
  const auto [cs, sn] = ops::rope_tables(40, 6, 10000.0);
  const auto [c2, s2] = ops::rope_tables(9, 2, 77.0);
  for (DType dt : {DType::f32, DType::f16}) {
    for (int64_t pos0 : {0, 7, 35})
      for (bool inv : {false, true}) {
        const Tensor x = as(randn({2, 5, 3, 6}, 10 + pos0), dt);
        const std::string what = fmt::format("{} pos0={} inverse={}", dtype_name(dt), pos0, inv);
        const Tensor gy = on_gpu([&] { return ops::rope(x, cs, sn, pos0, inv); });
        const Tensor cy = on_cpu([&] { return ops::rope(x, cs, sn, pos0, inv); });
        CHECK(gy.dtype() == dt);
        expect_close(gy, cy, tol(dt), tol(dt), what);
      }
    const Tensor x = as(randn({3, 4, 1, 2}, 20), dt);
    expect_close(on_gpu([&] { return ops::rope(x, c2, s2, 5); }), on_cpu([&] { return ops::rope(x, c2, s2, 5); }),
                 tol(dt), tol(dt), "D=2");
  }
  // Head sizes whose half is a multiple of 4 run 4 pairs per invocation in f16 (the model's D = 64 among them).
  for (int64_t D : {8, 16, 64}) {
    const auto [cd, sd] = ops::rope_tables(40, D, 10000.0);
    for (bool inv : {false, true}) {
      const Tensor x = as(randn({2, 7, 3, D}, 40 + D), DType::f16);
      expect_close(on_gpu([&] { return ops::rope(x, cd, sd, 9, inv, 2); }),
                   on_cpu([&] { return ops::rope(x, cd, sd, 9, inv, 2); }), tol(DType::f16), tol(DType::f16),
                   fmt::format("f16 D={} inverse={} (2 of 3 heads rotated)", D, inv));
    }
  }
  expect_clean();
}

TEST_CASE("vk swiglu and relu2 forward and backward match the CPU (f32 and f16)") {
  GpuScope g;
  for (DType dt : {DType::f32, DType::f16})
    for (int64_t n : {1, 7, 1000, 4099}) {
      const std::string what = fmt::format("{} n={}", dtype_name(dt), n);
      const Tensor a = as(randn({n}, 30, 3.0), dt), b = as(randn({n}, 31), dt), dy = as(randn({n}, 32), dt);
      expect_close(on_gpu([&] { return ops::swiglu(a, b); }), on_cpu([&] { return ops::swiglu(a, b); }), tol(dt), tol(dt),
                   what + " swiglu");
      const auto gs = on_gpu([&] { return ops::swiglu_backward(dy, a, b); });
      const auto cs = on_cpu([&] { return ops::swiglu_backward(dy, a, b); });
      expect_close(gs.dgate, cs.dgate, tol(dt), tol(dt), what + " dgate");
      expect_close(gs.dup, cs.dup, tol(dt), tol(dt), what + " dup");
      expect_close(on_gpu([&] { return ops::relu2(a); }), on_cpu([&] { return ops::relu2(a); }), tol(dt), tol(dt),
                   what + " relu2");
      expect_close(on_gpu([&] { return ops::relu2_backward(dy, a); }), on_cpu([&] { return ops::relu2_backward(dy, a); }),
                   tol(dt), tol(dt), what + " relu2 backward");
    }
  {  // f16 sizes that are multiples of 4 run 4 elements per invocation: the scalar kernel's bits (n = 1001 runs it)
    const Tensor a = as(randn({1001}, 33, 3.0), DType::f16), dy = as(randn({1001}, 34), DType::f16);
    const Tensor a4 = a.narrow(0, 0, 1000).contiguous(), dy4 = dy.narrow(0, 0, 1000).contiguous();
    const auto scalar = on_gpu([&] { return ops::relu2(a); }).to_f64_vector();
    const auto vec = on_gpu([&] { return ops::relu2(a4); }).to_f64_vector();
    const auto dscalar = on_gpu([&] { return ops::relu2_backward(dy, a); }).to_f64_vector();
    const auto dvec = on_gpu([&] { return ops::relu2_backward(dy4, a4); }).to_f64_vector();
    for (size_t i = 0; i < 1000; ++i) {
      REQUIRE(vec[i] == scalar[i]);
      REQUIRE(dvec[i] == dscalar[i]);
    }
  }
  expect_clean();
}

TEST_CASE("vk rope on a fused qkv (rot_heads) and swiglu_packed match the CPU (f32 and f16)") {
  GpuScope g;
  const auto [cs, sn] = ops::rope_tables(40, 8, 10000.0);
  for (DType dt : {DType::f32, DType::f16}) {
    const Tensor x = as(randn({2, 5, 5, 8}, 40), dt);  // (B, T, H + 2Hkv, D), H = 3, Hkv = 1
    for (bool inv : {false, true}) {
      const std::string what = fmt::format("{} inverse={}", dtype_name(dt), inv);
      expect_close(on_gpu([&] { return ops::rope(x, cs, sn, 3, inv, 4); }),
                   on_cpu([&] { return ops::rope(x, cs, sn, 3, inv, 4); }), tol(dt), tol(dt), what + " rope");
    }
    for (int64_t F : {1, 7, 300}) {
      const std::string what = fmt::format("{} F={}", dtype_name(dt), F);
      const Tensor gu = as(randn({3, 2, 2 * F}, 41, 3.0), dt), dy = as(randn({3, 2, F}, 42), dt);
      const Tensor gy = on_gpu([&] { return ops::swiglu_packed(gu); });
      CHECK(gy.shape() == Shape{3, 2, F});
      expect_close(gy, on_cpu([&] { return ops::swiglu_packed(gu); }), tol(dt), tol(dt), what + " swiglu_packed");
      expect_close(on_gpu([&] { return ops::swiglu_packed_backward(dy, gu); }),
                   on_cpu([&] { return ops::swiglu_packed_backward(dy, gu); }), tol(dt), tol(dt), what + " backward");
    }
  }
  expect_clean();
}

TEST_CASE("vk Llama with fused q/k/v and gate/up GEMMs: logits and gradients match the unfused math (f32, f16)") {
  for (const bool f16 : {false, true})
    for (const int64_t kv : {4, 2}) {  // MHA: one RoPE pass + attention on the packed qkv; GQA: qkv views
      INFO("f16 ", f16, " n_kv_head ", kv);
      GPTConfig cfg{2, 4, 32, 16, 40, 0.0, false};
      cfg.arch = "llama";
      cfg.n_kv_head = kv;
      cfg.mlp_hidden = 48;
      cfg.f16 = f16;
      Rng init(9);
      GPT model(cfg, init);
      std::vector<int32_t> ids(2 * 16), tg(ids.size());
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 13 + 5) % 40);
      for (size_t i = 0; i < ids.size(); ++i) tg[i] = (ids[i] + 3) % 40;
      const Tensor x = Tensor::from_vector(ids, {2, 16}), y = Tensor::from_vector(tg, {2, 16});
      auto run = [&](bool reference) {
        for (Tensor p : model.parameters()) p.set_grad(Tensor());
        Rng rng(0);
        const Tensor logits = reference ? test::llama_reference_logits(model, x) : model.forward(x, true, rng);
        ag::backward(ag::cross_entropy(ag::reshape(logits, {-1, 40}), y.reshape({-1})));
        std::vector<std::vector<double>> out{logits.to_f64_vector()};
        for (const Tensor& p : model.parameters()) out.push_back(p.grad().to_f64_vector());
        return out;
      };
      const auto ref = on_cpu([&] { return run(true); });
      std::vector<std::vector<double>> got;
      {
        GpuScope g;
        const int64_t before = dispatch_stats().gpu_ops;
        got = run(false);
        CHECK(dispatch_stats().gpu_ops - before > 50);
      }
      const double t = f16 ? 2e-2 : 1e-4;  // f16: activations rounded at different points than the CPU reference
      for (size_t i = 0; i < got.size(); ++i) {
        INFO((i == 0 ? std::string("logits") : model.named_parameters()[i - 1].first));
        double scale = 0, err = 0;
        for (double v : ref[i]) scale = std::max(scale, std::fabs(v));
        for (size_t k = 0; k < ref[i].size(); ++k) err = std::max(err, std::fabs(got[i][k] - ref[i][k]));
        CHECK(err <= t * std::max(scale, 1e-3));
      }
    }
  expect_clean();
}

TEST_CASE("vk tiny Llama (GQA, QK-norm, untied head, swiglu and relu2): loss and gradients match the CPU") {
  for (const char* act : {"swiglu", "relu2"}) {
    GPTConfig cfg{2, 4, 32, 16, 65, 0.0, false};
    cfg.arch = "llama";
    cfg.n_kv_head = 2;
    cfg.qk_norm = true;
    cfg.tie_embeddings = false;
    cfg.mlp_act = act;
    Rng init(7);
    GPT model(cfg, init);
    std::vector<int32_t> ids(2 * 16);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 37 + 11) % 65);
    const Tensor x = Tensor::from_vector(ids, {2, 16});
    std::vector<int32_t> t(ids.begin() + 1, ids.end());
    t.push_back(3);
    const Tensor y = Tensor::from_vector(t, {2, 16});
    auto run = [&] {
      for (Tensor p : model.parameters()) p.set_grad(Tensor());
      Rng rng(1);
      Tensor loss = model.loss(x, y, true, rng);
      ag::backward(loss);
      std::vector<std::vector<double>> grads;
      for (const Tensor& p : model.parameters()) grads.push_back(p.grad().to_f64_vector());
      return std::make_pair(loss.item(), grads);
    };
    const auto cpu = on_cpu(run);
    std::pair<double, std::vector<std::vector<double>>> gpu_r;
    {
      GpuScope g;
      const int64_t before = dispatch_stats().gpu_ops;
      gpu_r = run();
      CHECK(dispatch_stats().gpu_ops - before > 50);
    }
    CHECK(gpu_r.first == doctest::Approx(cpu.first).epsilon(1e-5));
    const auto& names = model.named_parameters();
    for (size_t i = 0; i < names.size(); ++i) {
      double scale = 0, err = 0;
      for (double v : cpu.second[i]) scale = std::max(scale, std::fabs(v));
      for (size_t k = 0; k < cpu.second[i].size(); ++k) err = std::max(err, std::fabs(gpu_r.second[i][k] - cpu.second[i][k]));
      INFO(act, " ", names[i].first);
      CHECK(err <= 1e-4 * std::max(scale, 1e-3));
    }
  }
  expect_clean();
}
