// Validation (issue 9): a 50-step `alpha train` on lavapipe with every op on the GPU, under
// VK_LAYER_KHRONOS_validation with synchronization validation (ALPHA_VK_VALIDATION=1 enables both, vk/device.cpp),
// reports zero validation errors. A deliberate write-after-write hazard first shows that sync validation is on
// and that its errors are seen (so the zero can fail).
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "test_util.h"
#include "vk/device.h"
#include "vk/handles.h"

using namespace alpha;
using namespace alpha::test;
namespace fs = std::filesystem;

namespace {

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// Turns validation on (and the debug host waits off: they would hide a missing barrier) for the guard's life.
struct ValidationEnv {
  ValidationEnv() {
    setenv("ALPHA_VK_VALIDATION", "1", 1);
    unsetenv("ALPHA_VK_DEBUG");
  }
  ~ValidationEnv() { unsetenv("ALPHA_VK_VALIDATION"); }
};

}  // namespace

TEST_CASE("synchronization validation is on with ALPHA_VK_VALIDATION=1: two unordered copies are an error") {
  ValidationEnv env;
  vk::DeviceOptions o;
  o.allow_cpu = true;
  vk::Device dev(o);  // validation from the environment, as `alpha train` gets it
  REQUIRE(dev.validation());
  MESSAGE("a deliberate synchronization hazard follows (SYNC-HAZARD-WRITE-AFTER-WRITE)");
  const VkDevice d = dev.get();
  const vk::Buffer src = vk::make_buffer(d, 256, VK_BUFFER_USAGE_TRANSFER_SRC_BIT);
  const vk::Buffer dst = vk::make_buffer(d, 256, VK_BUFFER_USAGE_TRANSFER_DST_BIT);
  auto bind = [&](const vk::Buffer& b) {
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d, b.get(), &req);
    uint32_t type = 0;
    while (!(req.memoryTypeBits & (1u << type))) ++type;
    vk::DeviceMemory m = vk::allocate_memory(d, req.size, type);
    VK_CHECK(vkBindBufferMemory(d, b.get(), m.get(), 0));
    return m;
  };
  const vk::DeviceMemory ms = bind(src), md = bind(dst);
  const vk::CommandPool pool = vk::make_command_pool(d, dev.queue_family());
  VkCommandBufferAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  ai.commandPool = pool.get();
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VK_CHECK(vkAllocateCommandBuffers(d, &ai, &cmd));
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  VK_CHECK(vkBeginCommandBuffer(cmd, &bi));
  const VkBufferCopy region{0, 0, 256};
  vkCmdCopyBuffer(cmd, src.get(), dst.get(), 1, &region);
  vkCmdCopyBuffer(cmd, src.get(), dst.get(), 1, &region);  // no barrier in between: write-after-write
  VK_CHECK(vkEndCommandBuffer(cmd));
  CHECK(dev.validation_errors() >= 1);
}

TEST_CASE("50 steps lavapipe, every op on the GPU, validation + sync validation: 0 errors") {
  ValidationEnv env;
  TempDir d;
  std::string err;
  const int rc = cli({"train", tiny_config(d.path), "--quiet", "--set", "device=vulkan", "--set", "dispatch.threshold=0",
                      "--set", "dispatch.matmul_threshold=0", "--set", "train.max_steps=50", "--set",
                      "train.eval_interval=25", "--set", "checkpoint.interval=25", "--set", "train.sample_tokens=8"},
                     &err);
  REQUIRE_MESSAGE(rc == kExitOk, err);
  const int errors = count(err, "[vk validation error]");
  MESSAGE("50 lavapipe steps under validation + synchronization validation: " << errors << " errors, "
                                                                          << count(err, "[vk validation warning]")
                                                                          << " warnings");
  CHECK_MESSAGE(errors == 0, err);
  // It trained on the GPU: 50 step records, each with GPU ops.
  int steps = 0;
  for (const auto& l : read_jsonl(d.path / "run" / "metrics.jsonl")) {
    if (l["type"] != "step") continue;
    ++steps;
    CHECK(l["backend"]["gpu_ops"].get<int64_t>() > 0);
  }
  CHECK(steps == 50);
}
