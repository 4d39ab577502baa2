// The MPI layer of data-parallel training (issue 17), run by CTest under `mpirun -np 2`: deterministic sums
// against a rank-order fold computed locally, the bucketed reducer with buckets made ready out of order, and
// autograd's leaf-ready hook. Each rank can rebuild every rank's inputs (seeded by rank), so it checks bits.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "dist/comm.h"
#include "dist/grad_reducer.h"

using namespace alpha;
using dist::World;

namespace {

// Rank r's values: awkward magnitudes so a different summation order changes the bits.
std::vector<float> rank_values(int r, int64_t n, uint64_t salt) {
  Rng rng(1000 * salt + static_cast<uint64_t>(r));
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.normal() * (rng.uniform() < 0.5 ? 1e-4 : 1e3));
  return v;
}

std::vector<float> fold(int64_t n, uint64_t salt) {
  std::vector<float> acc = rank_values(0, n, salt);
  for (int r = 1; r < World::size(); ++r) {
    const std::vector<float> v = rank_values(r, n, salt);
    for (size_t i = 0; i < acc.size(); ++i) acc[i] += v[i];
  }
  return acc;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

}  // namespace

TEST_CASE("the test runs on two ranks") {
  CHECK(World::active());
  CHECK(World::size() == 2);
  CHECK(World::rank() >= 0);
  CHECK(World::local_rank() == World::rank());  // one host
}

TEST_CASE("allreduce_sum_f32 is the rank-order fold on every rank, for any length") {
  for (int64_t n : {1, 2, 3, 7, 1000, 65537}) {
    std::vector<float> mine = rank_values(World::rank(), n, static_cast<uint64_t>(n));
    const int64_t bytes = dist::allreduce_sum_f32(mine.data(), n, "test all-reduce");
    const std::vector<float> want = fold(n, static_cast<uint64_t>(n));
    CHECK_MESSAGE(same_bits(mine.data(), want.data(), want.size()), "n = ", n);
    CHECK(bytes > 0);
    // Every rank holds the same bits: rank 0's copy, broadcast, matches.
    std::string blob(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(float));
    std::string r0 = blob;
    World::broadcast(r0, "test broadcast");
    CHECK(r0 == blob);
  }
}

TEST_CASE("sum_f64 folds in rank order") {
  std::vector<double> v = {0.1 * (World::rank() + 1), 1e16 * (World::rank() == 0 ? 1 : -1), 1.0};
  World::sum_f64(v, "test sum");
  double a = 0.1, b = 1e16, c = 1.0;
  for (int r = 1; r < World::size(); ++r) a += 0.1 * (r + 1), b += -1e16, c += 1.0;
  CHECK(v[0] == a);
  CHECK(v[1] == b);
  CHECK(v[2] == c);
}

TEST_CASE("GradReducer sums every parameter's gradient, buckets ready in any order") {
  const std::vector<Shape> shapes = {{5, 3}, {7}, {2, 2, 2}, {1}, {300}};
  std::vector<Tensor> params;
  for (const Shape& s : shapes) params.push_back(Tensor::zeros(s));
  for (int64_t bucket_bytes : {int64_t{1}, int64_t{64}, int64_t{1} << 20}) {
    dist::GradReducer red(params, bucket_bytes);
    CHECK(red.num_buckets() >= 1);
    for (int step = 0; step < 3; ++step) {
      red.reset_stats();
      for (size_t k = 0; k < params.size(); ++k) {
        if (k == 3) { params[k].set_grad(Tensor()); continue; }  // no gradient: counts as zeros
        const std::vector<float> g = rank_values(World::rank(), params[k].numel(), 10 * k + step);
        params[k].set_grad(Tensor::from_vector(g, params[k].shape()));
      }
      // Ready in registration order (the reverse of the buckets'): buckets wait for their turn.
      for (size_t k = 0; k < params.size(); ++k) red.on_ready(params[k]);
      red.finish();
      for (size_t k = 0; k < params.size(); ++k) {
        const Tensor g = params[k].grad();
        REQUIRE(g.defined());
        if (k == 3) {
          CHECK(g.data<float>()[0] == 0.0f);
          continue;
        }
        const std::vector<float> want = fold(params[k].numel(), 10 * k + step);
        CHECK_MESSAGE(same_bits(g.data<float>(), want.data(), want.size()), "param ", k, " step ", step);
      }
      CHECK(red.stats().bytes > 0);
    }
  }
}

TEST_CASE("autograd's leaf-ready hook reports each leaf once, after its last gradient") {
  Tensor w = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor b = Tensor::from_vector(std::vector<float>{0.5f, -1, 2}, {3});
  w.set_requires_grad(true);
  b.set_requires_grad(true);
  Tensor x = Tensor::from_vector(std::vector<float>{3, 4, 5}, {3});
  // w is used twice (last use = the first op), b once, near the loss.
  Tensor h = ag::mul(ag::mul(x, w), w);
  Tensor loss = ag::sum_all(ag::add(h, b));
  std::vector<std::pair<bool, float>> seen;  // (is w, its grad's first element at report time)
  ag::backward(loss, 1.0, [&](const Tensor& leaf) {
    seen.push_back({leaf.same(w), leaf.grad().data<float>()[0]});
  });
  REQUIRE(seen.size() == 2);
  CHECK_FALSE(seen[0].first);  // b first: its only use is the last op recorded
  CHECK(seen[0].second == 1.0f);
  CHECK(seen[1].first);
  CHECK(seen[1].second == doctest::Approx(2 * 3 * 1));  // d(x w^2)/dw = 2 x w, complete when reported
}

int main(int argc, char** argv) {
  World::init(&argc, &argv);
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  return World::finish(rc);
}
