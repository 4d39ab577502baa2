// spirv/nv2khr.h: the NV -> KHR cooperative-matrix rewrite of the GEMM kernels, checked on their embedded SPIR-V
// (CI has no GPU that runs either; the GPU suite runs the KHR kernels against the CPU oracle on the GPU machine).
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "spirv/kernels.h"
#include "spirv/nv2khr.h"

using namespace alpha;

namespace {
struct Ins {
  uint32_t op;
  std::vector<uint32_t> a;
};
std::vector<Ins> parse(const uint32_t* w, size_t n) {
  std::vector<Ins> out;
  for (size_t i = 5; i < n; i += w[i] >> 16) out.push_back({w[i] & 0xffffu, std::vector<uint32_t>(w + i + 1, w + i + (w[i] >> 16))});
  return out;
}
std::vector<uint32_t> words(const spirv::Blob& b) { return {b.words, b.words + b.count}; }
size_t count(const std::vector<Ins>& m, uint32_t op) {
  size_t c = 0;
  for (const Ins& x : m) c += x.op == op;
  return c;
}
}  // namespace

TEST_CASE("nv2khr: every coopmat GEMM and register-attention kernel has a KHR twin with the same loads, stores and products") {
  size_t twins = 0;
  for (const spirv::Blob& b : spirv::all_blobs()) {
    const std::string_view name = b.name;
    const bool coopmat = name.starts_with("matmul_cm") || name.starts_with("attention_cmr");
    if (!coopmat || name.ends_with("_khr")) continue;
    const spirv::Blob* k = spirv::find_blob(std::string(name) + "_khr");
    REQUIRE_MESSAGE(k, name);
    const auto nv = parse(b.words, b.count), khr = parse(k->words, k->count);
    // OpCooperativeMatrixMulAddNV (the timing probes `_pempty` and `_pstage` are tiles without products, by design)
    const bool no_products =
        name.find("_pempty") != std::string_view::npos || name.find("_pstage") != std::string_view::npos;
    CHECK_MESSAGE((count(nv, 5361) > 0) != no_products, name);
    CHECK_MESSAGE(count(khr, 4459) == count(nv, 5361), name);  // ... as many OpCooperativeMatrixMulAddKHR
    CHECK_MESSAGE(count(khr, 4457) == count(nv, 5359), name);  // loads
    CHECK_MESSAGE(count(khr, 4458) == count(nv, 5360), name);  // stores
    for (uint32_t nv_op : {5358u, 5359u, 5360u, 5361u, 5362u}) CHECK_MESSAGE(count(khr, nv_op) == 0, name);
    bool cap = false;
    for (const Ins& x : khr) cap |= x.op == 17 && x.a[0] == 6022;  // Capability CooperativeMatrixKHR
    CHECK_MESSAGE(cap, name);
    // The build's twin is what the rewrite gives now (one deterministic function of the NV module).
    CHECK_MESSAGE(spirv::nv_to_khr(words(b)) == words(*k), name);
    // No GEMM turns an accumulator into an A operand (NV_cooperative_matrix2's conversions); attention's forward does.
    if (name.starts_with("matmul_cm")) CHECK_MESSAGE(!spirv::declares_capability(*k, spirv::kCapConversionsNV), name);
    ++twins;
  }
  CHECK(twins >= 25);
  CHECK(spirv::declares_capability(*spirv::find_blob("attention_cmr_f16_khr"), spirv::kCapConversionsNV));
  CHECK(spirv::declares_capability(*spirv::find_blob("attention_cmr_f16_khr"), 6022));  // CooperativeMatrixKHR
  CHECK(!spirv::declares_capability(*spirv::find_blob("attention_cmr_f16"), spirv::kCapConversionsNV));
}

TEST_CASE("nv2khr: each product's operands carry the A, B and accumulator uses") {
  const spirv::Blob* b = spirv::find_blob("matmul_cm_f16_vec8_128x128w4k64s1_bias_khr");
  REQUIRE(b);
  const auto m = parse(b->words, b->count);
  std::map<uint32_t, uint32_t> type_of, constant, use_of_type;
  for (const Ins& x : m) {
    if (x.op == 43) constant[x.a[1]] = x.a[2];                                 // OpConstant
    if (x.op == 4456) use_of_type[x.a[0]] = x.a[5];                            // OpTypeCooperativeMatrixKHR
    if ((x.op == 4457 || x.op == 4459 || x.op == 61 || x.op == 245 || x.op == 115) && x.a.size() > 1)
      type_of[x.a[1]] = x.a[0];
  }
  REQUIRE(use_of_type.size() >= 3);
  size_t products = 0;
  for (const Ins& x : m) {
    if (x.op != 4459) continue;
    auto use = [&](uint32_t id) { return constant.at(use_of_type.at(type_of.at(id))); };
    CHECK(use(x.a[2]) == 0);  // MatrixAKHR
    CHECK(use(x.a[3]) == 1);  // MatrixBKHR
    CHECK(use(x.a[4]) == 2);  // MatrixAccumulatorKHR
    CHECK(constant.at(use_of_type.at(x.a[0])) == 2);
    ++products;
  }
  CHECK(products == 64 + 16);  // 4 x 4 fragments x 4 K slices unrolled, and the bias epilogue's I x B per fragment
}

TEST_CASE("nv2khr: what it cannot rewrite is an error naming the problem") {
  CHECK_THROWS_AS(spirv::nv_to_khr({1, 2, 3}), spirv::RewriteError);
  const spirv::Blob* b = spirv::find_blob("matmul_cm_f16_vec8_128x128w4k64s1");
  REQUIRE(b);
  // One product whose B operand is its A operand: a matrix with two uses, which KHR cannot express.
  std::vector<uint32_t> w = words(*b);
  for (size_t i = 5; i < w.size(); i += w[i] >> 16)
    if ((w[i] & 0xffffu) == 5361) {
      w[i + 4] = w[i + 3];
      break;
    }
  try {
    spirv::nv_to_khr(w);
    FAIL("a matrix used as both A and B was rewritten");
  } catch (const spirv::RewriteError& e) {
    CHECK(std::string(e.what()).find("both as A and B") != std::string::npos);
  }
  // A truncated module: cut at an instruction boundary, then an OpLoad claiming 0xffff words.
  size_t at = 5;
  while (at + (b->words[at] >> 16) < b->count / 2) at += b->words[at] >> 16;
  std::vector<uint32_t> cut(b->words, b->words + at);
  cut.push_back(0xffff0000u | 61);
  CHECK_THROWS_AS(spirv::nv_to_khr(cut), spirv::RewriteError);
}
