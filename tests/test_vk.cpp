// The Vulkan runtime: device features, lazy queue batching and flush policy, barriers only between
// dependent dispatches, buffer pool reuse, typed out-of-memory and asynchronous errors, pipeline cache,
// host/device coherence of Storage, and an f16-storage kernel variant.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/dtype.h"
#include "spirv/push_constants.h"
#include "tests/vk_test_util.h"

using namespace alpha;
using namespace alpha::vktest;

TEST_CASE("vk device is found and reports its features") {
  auto& dev = gpu().runtime().device();
  const auto& f = dev.features();
  CHECK(!f.name.empty());
  CHECK(f.timeline_semaphores);
  CHECK(f.subgroup_size > 0);
  CHECK(f.shared_memory_bytes >= 16384);  // the Vulkan minimum
  CHECK(f.max_storage_buffer_range > 0);
  const std::string d = dev.describe();
  CHECK(d.find(f.name) != std::string::npos);
  CHECK(d.find("cooperative matrix") != std::string::npos);
  CHECK(!vk::Device::list().empty());
  const char* v = std::getenv("ALPHA_VK_VALIDATION");
  if (v && std::string(v) == "1") CHECK(dev.validation());  // the validation run really has the layer on
  MESSAGE(d);
}

namespace {
// Submissions the lazy queue makes while recording n dispatches after a drain (vk/queue.h's Policy: the ramp from
// ramp_ops, doubling per submission, up to max_ops).
int64_t submissions_for(const vk::LazyQueue::Policy& p, int64_t n) {
  int64_t limit = p.ramp_ops > 0 ? std::min(p.ramp_ops, p.max_ops) : p.max_ops, in_rec = 0, subs = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (++in_rec < limit) continue;
    ++subs;
    in_rec = 0;
    if (p.ramp_ops > 0) limit = std::min(2 * limit, p.max_ops);
  }
  return subs;
}
}  // namespace

TEST_CASE("vk lazy queue batches dependent ops into few submissions and flushes on read-back") {
  GpuScope g;
  auto& q = gpu().runtime().queue();
  gpu().sync();
  const Tensor x = randn({65}, 80);
  const auto s0 = q.stats();
  Tensor y = x;
  for (int i = 0; i < 10; ++i) y = ops::add_scalar(ops::scale(y, 0.5), 1.0);  // 20 dependent ops
  const int64_t subs = submissions_for(q.policy(), 20);
  CHECK(subs < 20 / 2);
  CHECK(q.stats().submissions == s0.submissions + subs);  // the rest recorded, not submitted
  CHECK(q.stats().bytes_down == s0.bytes_down);
  const auto got = y.to_f32_vector();               // read-back: one flush
  CHECK(q.stats().submissions == s0.submissions + subs + 1);
  CHECK(q.stats().dispatches == s0.dispatches + 20);
  const auto want = on_cpu([&] {
    Tensor z = x;
    for (int i = 0; i < 10; ++i) z = ops::add_scalar(ops::scale(z, 0.5), 1.0);
    return z;
  });
  expect_close(y, want, 1e-6, 1e-6, "chain");
  expect_clean();
}

TEST_CASE("vk lazy queue: an asynchronous read-back returns its submission's bytes while later work is queued") {
  GpuScope g;
  auto& q = gpu().runtime().queue();
  gpu().sync();
  const Tensor x = randn({64}, 81);
  Tensor y = ops::add_scalar(ops::scale(x, 2.0), 1.0);
  Tensor z = ops::scale(y, 3.0);
  const auto s0 = q.stats();
  auto t1 = q.download_async(vk::Runtime::buffer_of(y), 16 * sizeof(float));  // y's first 16, then z's
  auto t2 = q.download_async(vk::Runtime::buffer_of(z), 16 * sizeof(float));
  CHECK(q.stats().submissions == s0.submissions + 2);  // each submits what was recorded up to its copy
  Tensor w = z;
  for (int i = 0; i < 6; ++i) w = ops::add_scalar(w, 1.0);  // later work, recorded after both tickets
  float a[16], b[16];
  const auto s1 = q.stats();
  q.read(t1, a);
  // The later work went out before the wait (the GPU runs it meanwhile); the second read has nothing to submit.
  CHECK(q.stats().submissions == s1.submissions + 1);
  q.read(t2, b);
  CHECK(q.stats().submissions == s1.submissions + 1);
  CHECK(t1.value == 0);  // read once
  CHECK_THROWS_AS(q.read(t1, a), ValueError);
  const auto xs = x.to_f32_vector();
  for (int i = 0; i < 16; ++i) {
    CHECK(a[i] == float(float(xs[i] * 2.0f) + 1.0f));
    CHECK(b[i] == float(a[i] * 3.0f));
  }
  CHECK(q.stats().host_reads == s0.host_reads + 2);
  CHECK(q.stats().bytes_down == s0.bytes_down + 2 * 16 * int64_t(sizeof(float)));
  const auto ws = w.to_f32_vector();  // the later work is intact
  CHECK(std::abs(ws[0] - (b[0] + 6.0f)) < 1e-4f);
  expect_clean();
}

TEST_CASE("vk lazy queue flushes every max_ops dispatches after a ramp from ramp_ops (the documented policy)") {
  GpuScope g;
  auto& q = gpu().runtime().queue();
  gpu().sync();
  const vk::LazyQueue::Policy p = q.policy();
  REQUIRE(p.ramp_ops > 0);
  REQUIRE(p.ramp_ops < p.max_ops);
  // The ramp's submissions (ramp_ops, 2 ramp_ops, ... < max_ops), then two of max_ops, then 3 recorded.
  int64_t n = 0, ramp = 0;
  for (int64_t l = p.ramp_ops; l < p.max_ops; l *= 2, ++ramp) n += l;
  n += 2 * p.max_ops + 3;
  CHECK(submissions_for(p, n) == ramp + 2);
  const auto s0 = q.stats();
  Tensor y = randn({17}, 81);
  for (int64_t i = 0; i < n; ++i) y = ops::neg(y);
  CHECK(q.stats().submissions == s0.submissions + ramp + 2);
  (void)y.to_f32_vector();
  CHECK(q.stats().submissions == s0.submissions + ramp + 3);
  // The read-back drained the GPU: the ramp starts again.
  const auto s1 = q.stats();
  for (int64_t i = 0; i < p.ramp_ops; ++i) y = ops::neg(y);
  CHECK(q.stats().submissions == s1.submissions + 1);
  gpu().sync();
  expect_clean();
}

TEST_CASE("vk lazy queue: a hold keeps max_ops from submitting; its release submits what it held") {
  GpuScope g;
  auto& q = gpu().runtime().queue();
  gpu().sync();
  const int64_t max_ops = q.policy().max_ops;
  const auto s0 = q.stats();
  const Tensor x = randn({17}, 84);
  Tensor y = x;
  q.hold(true);
  for (int64_t i = 0; i < 2 * max_ops + 3; ++i) y = ops::neg(y);
  CHECK(q.stats().submissions == s0.submissions);  // held: all recorded
  q.hold(false);
  CHECK(q.stats().submissions == s0.submissions + 1);
  expect_close(y, ops::neg(x), 0, 0, "an odd number of negations");  // (2 max_ops + 3 is odd)
  expect_clean();
}

TEST_CASE("ALPHA_VK_MAX_OPS / MAX_WORK / RAMP_OPS: a number sets the queue's policy, anything else is an error") {
  vk::RuntimeOptions o;
  o.device.allow_cpu = true;
  setenv("ALPHA_VK_MAX_OPS", "48", 1);
  setenv("ALPHA_VK_MAX_WORK", "2e9", 1);
  setenv("ALPHA_VK_RAMP_OPS", "2", 1);
  {
    vk::Runtime rt(o);
    CHECK(rt.queue().policy().max_ops == 48);
    CHECK(rt.queue().policy().max_work == 2e9);
    CHECK(rt.queue().policy().ramp_ops == 2);
  }
  for (const char* name : {"ALPHA_VK_MAX_OPS", "ALPHA_VK_MAX_WORK", "ALPHA_VK_RAMP_OPS"}) unsetenv(name);
  {  // a CPU device (lavapipe) blocks at once, a GPU spins, unless ALPHA_VK_SPIN_US says otherwise (0 included)
    vk::Runtime rt(o);
    const bool cpu_device = rt.device().features().type == VK_PHYSICAL_DEVICE_TYPE_CPU;
    CHECK(rt.queue().policy().spin_wait_us == (cpu_device ? 0.0 : 2e5));
    setenv("ALPHA_VK_SPIN_US", "0", 1);
    CHECK(vk::Runtime(o).queue().policy().spin_wait_us == 0);
    setenv("ALPHA_VK_SPIN_US", "5e4", 1);
    CHECK(vk::Runtime(o).queue().policy().spin_wait_us == 5e4);
    unsetenv("ALPHA_VK_SPIN_US");
  }
  for (const char* name : {"ALPHA_VK_MAX_OPS", "ALPHA_VK_MAX_WORK", "ALPHA_VK_RAMP_OPS", "ALPHA_VK_SPIN_US"}) {
    for (const char* bad : {"0", "-3", "x", "4x", "1e30"}) {
      if (std::string_view(name) == "ALPHA_VK_SPIN_US" && std::string_view(bad) == "0") continue;  // off: valid
      CAPTURE(name);
      CAPTURE(bad);
      setenv(name, bad, 1);
      CHECK_THROWS_WITH_AS(vk::Runtime{o}, doctest::Contains(name), ValueError);
      unsetenv(name);
    }
  }
}

TEST_CASE("vk barriers are recorded only between dependent dispatches") {
  GpuScope g;
  auto& q = gpu().runtime().queue();
  const Tensor x = randn({33}, 82), y = randn({33}, 83);
  const Tensor xe = ops::neg(x), ye = ops::neg(y);  // uploads + first use
  (void)ops::add(xe, ye);  // depends on both: after its barrier, xe and ye were written in older epochs
  const int64_t b0 = q.stats().barriers;
  const Tensor a = ops::exp(xe);
  const Tensor b = ops::exp(ye);    // independent of a
  const Tensor c = ops::exp(xe);    // reads what a reads: no hazard
  CHECK(q.stats().barriers == b0);
  const Tensor d = ops::add(a, b);  // reads a and b (written in this epoch): RAW -> one barrier
  CHECK(q.stats().barriers == b0 + 1);
  expect_close(d, on_cpu([&] { return ops::add(ops::exp(ops::neg(x)), ops::exp(ops::neg(y))); }), 1e-5, 1e-6, "d");
  expect_close(c, a, 0, 0, "c");
  expect_clean();
}

TEST_CASE("vk cat writes its inputs' windows without barriers between them; readers of the result wait") {
  GpuScope g;
  auto& q = gpu().runtime().queue();
  const Tensor x = randn({5, 3}, 86), y = randn({2, 3}, 87), z = randn({4, 3}, 88);
  const Tensor xe = ops::neg(x), ye = ops::neg(y), ze = ops::neg(z);
  for (const Tensor& t : {xe, ye, ze}) (void)ops::add(t, t);  // after these barriers xe, ye, ze are older epochs'
  const int64_t b0 = q.stats().barriers;
  const Tensor c = ops::cat({xe, ye, ze}, 0);  // three copies into disjoint windows of one fresh buffer
  CHECK(q.stats().barriers == b0);
  const Tensor d = ops::exp(c);  // reads what the copies wrote: RAW -> one barrier
  CHECK(q.stats().barriers == b0 + 1);
  const Tensor e = ops::cat({c, ops::neg(ops::neg(c))}, 1);  // the second input is written this epoch: RAW barriers
  CHECK(q.stats().barriers > b0 + 1);
  expect_close(d, on_cpu([&] { return ops::exp(ops::cat({ops::neg(x), ops::neg(y), ops::neg(z)}, 0)); }), 1e-6, 1e-7, "d");
  expect_close(e, on_cpu([&] { const Tensor r = ops::cat({ops::neg(x), ops::neg(y), ops::neg(z)}, 0);
                               return ops::cat({r, r}, 1); }), 0, 0, "e");
  expect_clean();
}

TEST_CASE("vk buffer pool reuses freed blocks") {
  GpuScope g;
  auto& pool = gpu().runtime().pool();
  const Tensor x = randn({1000}, 84);
  { const Tensor t = ops::exp(x); (void)t.to_f32_vector(); }  // creates then frees a 4000-byte output
  gpu().sync();                                     // the submission completed: blocks are back in the pool
  const auto s0 = pool.stats();
  { const Tensor t = ops::exp(x); (void)t.to_f32_vector(); }
  CHECK(pool.stats().hits > s0.hits);
  CHECK(pool.stats().misses == s0.misses);
  CHECK(vk::BufferPool::size_class(1000) == 1024);
  CHECK(vk::BufferPool::size_class(1100) == 1280);
  expect_clean();
}

TEST_CASE("vk an allocation that cannot be satisfied raises OutOfMemoryError naming size and heap") {
  auto& pool = gpu().runtime().pool();
  const uint64_t huge = uint64_t{1} << 40;  // 1 TiB
  try {
    (void)pool.acquire(huge);
    FAIL("expected OutOfMemoryError");
  } catch (const vk::OutOfMemoryError& e) {
    const std::string msg = e.what();
    CHECK(msg.find(std::to_string(huge)) != std::string::npos);
    CHECK(msg.find("heap " + std::to_string(pool.allocator().heap())) != std::string::npos);
  }
  const auto small = pool.acquire(64);  // still usable afterwards
  CHECK(small->size() == 64);
  expect_clean();
}

TEST_CASE("vk pipelines are built once per (kernel, specialization) and then hit the cache") {
  GpuScope g;
  auto& pc = gpu().runtime().pipelines();
  const Tensor x = randn({7}, 85);
  (void)ops::sqrt(ops::exp(x)).to_f32_vector();  // warm: unary OP=1 and OP=3
  const auto s0 = pc.stats();
  (void)ops::sqrt(ops::exp(x)).to_f32_vector();
  CHECK(pc.stats().misses == s0.misses);
  CHECK(pc.stats().hits == s0.hits + 2);
  (void)ops::log(ops::exp(x)).to_f32_vector();  // log is a new specialization (OP=2), exp hits
  CHECK(pc.stats().hits == s0.hits + 3);
  CHECK(pc.stats().misses - s0.misses <= 1);
  expect_clean();
}

TEST_CASE("vk host writes after a GPU op re-upload, and GPU results read back correctly") {
  GpuScope g;
  Tensor x = randn({17}, 86);
  Tensor y = ops::neg(x);      // y lives on the device
  float* p = y.mutable_data<float>();  // downloads, then the device copy is stale
  p[3] = 100.0f;
  const Tensor z = ops::neg(y);  // must upload the modified host copy
  const auto zv = z.to_f32_vector(), xv = x.to_f32_vector();
  CHECK(zv[3] == -100.0f);
  CHECK(zv[4] == xv[4]);
  expect_clean();
}

TEST_CASE("vk asynchronous device loss surfaces at the next sync as DeviceLostError") {
  vk::RuntimeOptions o;
  o.device.allow_cpu = true;
  vk::VulkanBackend be(o);
  for (int c = 0; c < 9; ++c) be.set_threshold(static_cast<OpClass>(c), 0);
  set_active_backend(&be);
  const Tensor x = randn({9}, 87);
  const Tensor y = ops::exp(x);
  be.runtime().queue().inject_submit_error(VK_ERROR_DEVICE_LOST);
  CHECK_NOTHROW(be.runtime().queue().flush());  // not a sync point: the error is kept
  CHECK_THROWS_AS(y.to_f32_vector(), vk::DeviceLostError);
  CHECK_THROWS_AS(be.sync(), vk::DeviceLostError);  // sticky
  set_active_backend(nullptr);
  CHECK(be.runtime().device().validation_errors() == 0);
}

TEST_CASE("vk f16-storage variant of the binary kernel computes in f32 and stores f16") {
  auto& rt = gpu().runtime();
  if (!rt.device().features().storage_16bit) FAIL("device lacks 16-bit storage; the f16 variants cannot run");
  const int n = 19;
  std::vector<uint16_t> a(n), b(n);
  for (int i = 0; i < n; ++i) a[i] = f32_to_f16(0.25f * i - 2.0f), b[i] = f32_to_f16(1.5f - 0.125f * i);
  const auto ba = rt.upload_new(a.data(), n * 2), bb = rt.upload_new(b.data(), n * 2), bo = rt.scratch(n * 2);
  const vk::pc::BinaryPC pc{uint32_t(n), uint32_t(n), uint32_t(n), 0};
  rt.run("binary_f16", {64, 2 /* mul */}, {{ba, false}, {bb, false}, {bo, true}}, pc, vk::Runtime::grid_for(n, 64), n);
  std::vector<uint16_t> o(n);
  rt.queue().download(bo, o.data(), n * 2);
  for (int i = 0; i < n; ++i)
    CHECK(f16_to_f32(o[i]) == f16_to_f32(f32_to_f16(f16_to_f32(a[i]) * f16_to_f32(b[i]))));
  expect_clean();
}

TEST_CASE("vk declines what it does not support: f64, non-contiguous, offset views") {
  GpuScope g;
  const Tensor x64 = randn({5}, 88).to(DType::f64);
  const Tensor xt = randn({3, 5}, 89).transpose(0, 1);
  const Tensor xn = randn({4, 5}, 90).narrow(0, 1, 2);
  const int64_t before = dispatch_stats().gpu_ops;
  expect_close(ops::exp(x64), on_cpu([&] { return ops::exp(x64); }), 0, 0, "f64");
  expect_close(ops::exp(xt), on_cpu([&] { return ops::exp(xt); }), 0, 0, "transposed");
  expect_close(ops::exp(xn), on_cpu([&] { return ops::exp(xn); }), 0, 0, "offset");
  CHECK(dispatch_stats().gpu_ops == before);
  expect_clean();
}

TEST_CASE("vk validation messenger counts errors (so the zero-error checks can fail)") {
  vk::DeviceOptions o;
  o.allow_cpu = true;
  o.validation = true;
  vk::Device dev(o);
  REQUIRE(dev.validation());
  MESSAGE("a deliberate validation error follows (buffer of size 0)");
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = 0;  // VUID-VkBufferCreateInfo-size-00912
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkBuffer b = VK_NULL_HANDLE;
  if (vkCreateBuffer(dev.get(), &info, nullptr, &b) == VK_SUCCESS && b) vkDestroyBuffer(dev.get(), b, nullptr);
  CHECK(dev.validation_errors() >= 1);
}
