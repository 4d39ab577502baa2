// Vulkan memory and policy pieces in isolation: the slab allocator (first fit, coalescing, dedicated
// slabs), the staging ring wrapping under uploads/read-backs larger than itself, 2-D dispatch grids for
// more than 65535 workgroups, and the size-threshold policy with its ALPHA_GPU_MIN_WORK override.
#include <cstdlib>

#include "tests/vk_test_util.h"

using namespace alpha;
using namespace alpha::vktest;

namespace {
std::shared_ptr<vk::Device> device() {
  vk::DeviceOptions o;
  o.allow_cpu = true;
  return std::make_shared<vk::Device>(o);
}
}  // namespace

TEST_CASE("vk allocator sub-allocates one slab first-fit, coalesces frees, and frees dedicated slabs") {
  const VkDeviceSize slab = 1 << 20;
  vk::Allocator al(device(), slab);
  const VkDeviceSize k300 = 300 * 1024;
  const auto a = al.allocate(k300), b = al.allocate(k300), c = al.allocate(k300);
  REQUIRE((a && b && c));
  CHECK(al.used_bytes() == slab);  // all three in one slab
  CHECK((a->slab == b->slab && b->slab == c->slab));
  CHECK(a->offset % al.alignment() == 0);
  CHECK(b->offset == a->offset + a->size);
  al.free(*a);
  al.free(*b);  // a and b coalesce into one 600 KiB hole at offset 0
  const auto d = al.allocate(500 * 1024);
  REQUIRE(d);
  CHECK(d->offset == 0);
  CHECK(al.used_bytes() == slab);  // no new slab needed
  const auto big = al.allocate(slab);  // over half a slab: a dedicated allocation
  REQUIRE(big);
  CHECK(al.used_bytes() == 2 * slab);
  al.free(*big);
  CHECK(al.used_bytes() == slab);
  al.free(*c);
  al.free(*d);
  CHECK(!al.allocate(VkDeviceSize{1} << 40));  // refused, not thrown: the pool names size and heap
}

TEST_CASE("vk staging ring smaller than the data: uploads and read-backs are chunked and wait for space") {
  vk::RuntimeOptions o;
  o.device.allow_cpu = true;
  o.queue.staging_bytes = 4096;  // 2 KiB chunks for a 12 KB tensor
  vk::Runtime rt(o);
  std::vector<float> v(3000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f - 7.0f;
  const auto buf = rt.upload_new(v.data(), v.size() * 4);
  std::vector<float> back(v.size(), 0.0f);
  rt.queue().download(buf, back.data(), back.size() * 4);
  CHECK(back == v);
  CHECK(rt.queue().stats().bytes_up == 12000);
  CHECK(rt.queue().stats().bytes_down == 12000);
  CHECK(rt.queue().stats().submissions >= 6);  // every 2 KiB read-back chunk is its own sync
  CHECK(rt.device().validation_errors() == 0);
}

TEST_CASE("vk row and element kernels cover more than 65535 workgroups (2-D grids)") {
  GpuScope g;
  const Tensor x = randn({70000, 3}, 90);
  expect_close(on_gpu([&] { return ops::sum(x, 1, false); }), on_cpu([&] { return ops::sum(x, 1, false); }), 1e-5, 1e-5,
               "sum rows");
  const auto y = on_gpu([&] { return ops::softmax(x, false); }).to_f32_vector();
  double worst = 0;
  for (int64_t r = 0; r < 70000; ++r) worst = std::max(worst, std::fabs(y[r * 3] + y[r * 3 + 1] + y[r * 3 + 2] - 1.0));
  CHECK(worst < 1e-5);  // every row (including those in grid row y > 0) normalized
  const Tensor big = randn({65535 * 256 + 77}, 91);  // > 65535 groups of 256
  expect_close(on_gpu([&] { return ops::neg(big); }), on_cpu([&] { return ops::neg(big); }), 0, 0, "neg big");
  expect_clean();
}

TEST_CASE("vk size thresholds: documented defaults and the ALPHA_GPU_MIN_WORK override") {
  auto& be = gpu();
  vk::VulkanBackend fresh([] {
    vk::RuntimeOptions o;
    o.device.allow_cpu = true;
    return o;
  }());
  if (!std::getenv("ALPHA_GPU_MIN_WORK")) {
    CHECK(fresh.wants(OpClass::elementwise, 1 << 20));
    CHECK(!fresh.wants(OpClass::elementwise, (1 << 20) - 1));
    CHECK(!fresh.wants(OpClass::matmul, (1 << 24) - 1));
    CHECK(fresh.wants(OpClass::matmul, 1 << 24));
  }
  setenv("ALPHA_GPU_MIN_WORK", "0", 1);
  vk::VulkanBackend forced([] {
    vk::RuntimeOptions o;
    o.device.allow_cpu = true;
    return o;
  }());
  CHECK(forced.wants(OpClass::softmax, 1));
  CHECK(forced.wants(OpClass::matmul, 0));
  setenv("ALPHA_GPU_MIN_WORK", "lots", 1);
  CHECK_THROWS_AS(vk::VulkanBackend([] {
                    vk::RuntimeOptions o;
                    o.device.allow_cpu = true;
                    return o;
                  }()),
                  ValueError);
  unsetenv("ALPHA_GPU_MIN_WORK");
  CHECK(be.name().rfind("vulkan:", 0) == 0);
}
