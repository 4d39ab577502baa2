#include "vk/queue.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "vk/fault.h"

namespace alpha::vk {

LazyQueue::LazyQueue(std::shared_ptr<Device> dev, Policy policy)
    : dev_(std::move(dev)),
      policy_(policy),
      timeline_(make_timeline_semaphore(dev_->get(), 0)),
      ring_(dev_, policy.staging_bytes) {
  if (policy_.ramp_ops > 0) ops_limit_ = std::min(policy_.ramp_ops, policy_.max_ops);  // an idle GPU to start with
  // Timestamps need the compute queue's valid bits; the spec's timestampComputeAndGraphics says all queues have them.
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(dev_->physical(), &props);
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(dev_->physical(), &n, nullptr);
  std::vector<VkQueueFamilyProperties> fams(n);
  vkGetPhysicalDeviceQueueFamilyProperties(dev_->physical(), &n, fams.data());
  const uint32_t bits = dev_->queue_family() < n ? fams[dev_->queue_family()].timestampValidBits : 0;
  if (props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && !policy_.spin_on_cpu_device) policy_.spin_wait_us = 0;
  if (props.limits.timestampComputeAndGraphics && bits > 0 && props.limits.timestampPeriod > 0) {
    timestamp_mask_ = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    timestamp_period_ns_ = props.limits.timestampPeriod;
  }
}

bool LazyQueue::set_profiling(bool on) {
  profiling_ = on && profiling_available();
  return profiling_;
}

bool LazyQueue::set_edge_timing(bool on) {
  edge_timing_ = on && profiling_available();
  if (!edge_timing_) last_end_tick_ = 0;  // the next timed run starts without a gap to an old submission
  return edge_timing_;
}

LazyQueue::~LazyQueue() {
  try {
    if (error_ == VK_SUCCESS) sync();
  } catch (...) {  // destructors must not throw; the device is being torn down anyway
  }
  // A wait ran out: after one more second, abandon what the GPU may still run (leaked, never destroyed under it)
  // and the device, so the process exits instead of blocking on a hung GPU.
  if (!wait_idle_quietly()) {
    for (auto& f : in_flight_) (void)f.release();
    dev_->abandon();
  }
}

bool LazyQueue::wait_idle_quietly() noexcept {
  if (!hung_) return (void)vkQueueWaitIdle(dev_->queue()), true;
  // Hung: one more second for what was submitted (an unbounded wait could block the process forever).
  const VkSemaphore sem = timeline_.get();
  VkSemaphoreWaitInfo wi{};
  wi.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
  wi.semaphoreCount = 1;
  wi.pSemaphores = &sem;
  wi.pValues = &submitted_value_;
  return vkWaitSemaphores(dev_->get(), &wi, uint64_t{1000} * 1000 * 1000) == VK_SUCCESS;
}

LazyQueue::Frame& LazyQueue::recording() {
  if (rec_) return *rec_;
  if (drained_at_ != std::chrono::steady_clock::time_point{} && !restart_recorded_) {
    restart_recorded_ = true;
    stats_.restart_first_ns +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - drained_at_).count();
  }
  retire();
  // A failure below (out of memory) must not leave a half-made recording behind for flush() to submit.
  struct Guard {
    std::unique_ptr<Frame>* rec;
    bool ok = false;
    ~Guard() {
      if (!ok) rec->reset();
    }
  } guard{&rec_};
  if (!spare_.empty()) {
    rec_ = std::move(spare_.back());
    spare_.pop_back();
  } else {
    rec_ = std::make_unique<Frame>();
    rec_->pool = make_command_pool(dev_->get(), dev_->queue_family());
    VkCommandBufferAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ai.commandPool = rec_->pool.get();
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    ALPHA_VK_FAULT_POINT(command_buffer, VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateCommandBuffers");
    VK_CHECK(vkAllocateCommandBuffers(dev_->get(), &ai, &rec_->cmd));
  }
  rec_->value = next_value_;
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_CHECK(vkBeginCommandBuffer(rec_->cmd, &bi));
  rec_->names.clear();
  rec_->profiled = profiling_;
  if (profiling_) {
    if (!rec_->queries) {
      // Two per dispatch; a recording is submitted at max_ops dispatches (or when the pool is full).
      rec_->query_capacity = static_cast<uint32_t>(2 * std::clamp<int64_t>(policy_.max_ops, 1, 4096));
      VkQueryPoolCreateInfo qi{};
      qi.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
      qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qi.queryCount = rec_->query_capacity;
      VkQueryPool qp = VK_NULL_HANDLE;
      VK_CHECK(vkCreateQueryPool(dev_->get(), &qi, nullptr, &qp));
      rec_->queries = QueryPool(dev_->get(), qp);
      ++stats_.query_pools;
    }
    vkCmdResetQueryPool(rec_->cmd, rec_->queries.get(), 0, rec_->query_capacity);
  }
  rec_->edge_timed = edge_timing_;
  if (edge_timing_) {
    if (!rec_->edges) {
      VkQueryPoolCreateInfo qi{};
      qi.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
      qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qi.queryCount = 2;
      VkQueryPool qp = VK_NULL_HANDLE;
      VK_CHECK(vkCreateQueryPool(dev_->get(), &qi, nullptr, &qp));
      rec_->edges = QueryPool(dev_->get(), qp);
      ++stats_.query_pools;
    }
    vkCmdResetQueryPool(rec_->cmd, rec_->edges.get(), 0, 2);
    // Top of the pipe: when the GPU reaches this submission (it drains the one before on NVIDIA's driver).
    vkCmdWriteTimestamp(rec_->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, rec_->edges.get(), 0);
  }
  guard.ok = true;
  return *rec_;
}

void LazyQueue::track(Frame& f, std::span<const Binding> uses, bool cu) {
  bool hazard = false;
  for (const auto& u : uses) {
    const GpuBuffer& b = *u.buf;
    if (b.write_epoch == epoch_ && !(u.write && u.disjoint)) hazard = true;  // RAW or WAW (disjoint windows: none)
    if (u.write && b.read_epoch == epoch_) hazard = true;     // WAR: an earlier command still reads it
  }
  if (policy_.barrier_all) hazard = true;
  if (hazard) {
    // The hazard above: this command depends on an earlier compute/transfer command in submission order
    // (this or an earlier submission). One global barrier orders and makes visible all earlier writes.
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                       VK_ACCESS_TRANSFER_WRITE_BIT;
    VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    // PTX launches (launch_cu) belong to no stage the extension names: a barrier with one on either side orders all
    // commands. The others need not: an earlier launch was already ordered before everything after its own barrier.
    if (dev_->features().nvx_ptx && (cu || cu_in_epoch_ || policy_.cu_all_stages)) {
      stages = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
      mb.srcAccessMask |= VK_ACCESS_MEMORY_WRITE_BIT;
      mb.dstAccessMask |= VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
    }
    vkCmdPipelineBarrier(f.cmd, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
    ++epoch_;
    ++stats_.barriers;
    cu_in_epoch_ = false;
  }
  if (cu) cu_in_epoch_ = true;
  for (const auto& u : uses) {
    GpuBuffer& b = *u.buf;
    if (u.write) b.write_epoch = epoch_;
    else b.read_epoch = epoch_;
    if (b.retained_by != f.value) {  // keep it alive until this submission completes
      b.retained_by = f.value;
      f.retained.push_back(u.buf);
    }
  }
}

VkDescriptorSet LazyQueue::allocate_set(Frame& f, VkDescriptorSetLayout layout) {
  constexpr uint32_t kSets = 128, kDescriptors = kSets * 8;
  while (true) {
    if (f.dpool_next == f.dpools.size()) {
      ALPHA_VK_FAULT_POINT(descriptor_pool, VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkCreateDescriptorPool");
      f.dpools.push_back(make_descriptor_pool(dev_->get(), kSets, kDescriptors));
    }
    VkDescriptorSetAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    ai.descriptorPool = f.dpools[f.dpool_next].get();
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    const VkResult r = vkAllocateDescriptorSets(dev_->get(), &ai, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) VK_CHECK(r);
    ++f.dpool_next;  // this pool is full: the next one
  }
}

void LazyQueue::dispatch(const ComputePipeline& p, std::span<const Binding> bindings, const void* push,
                         std::array<uint32_t, 3> groups, double work, std::string_view name) {
  if (error_ != VK_SUCCESS) return;  // the device is gone; the error surfaces at the next sync
  Frame& f = recording();
  track(f, bindings);
  const VkDescriptorSet set = allocate_set(f, p.set_layout);
  std::vector<VkDescriptorBufferInfo> infos(bindings.size());
  std::vector<VkWriteDescriptorSet> writes(bindings.size());
  for (size_t i = 0; i < bindings.size(); ++i) {
    infos[i] = {bindings[i].buf->buffer(), bindings[i].buf->offset(), bindings[i].buf->size()};
    writes[i] = {};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(dev_->get(), static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  vkCmdBindPipeline(f.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  vkCmdBindDescriptorSets(f.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  if (p.push_size) vkCmdPushConstants(f.cmd, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_size, push);
  record(f, work, name, [&] { vkCmdDispatch(f.cmd, groups[0], groups[1], groups[2]); });
}

void LazyQueue::launch_cu(VkCuFunctionNVX fn, std::span<const Binding> bindings, std::span<const void* const> params,
                          std::array<uint32_t, 3> grid, uint32_t threads, uint32_t shared_bytes, double work,
                          std::string_view name) {
  if (error_ != VK_SUCCESS) return;
  Frame& f = recording();
  track(f, bindings, true);  // the kernel reads and writes the buffers behind its pointer arguments: same hazards
  VkCuLaunchInfoNVX li{};
  li.sType = VK_STRUCTURE_TYPE_CU_LAUNCH_INFO_NVX;
  li.function = fn;
  li.gridDimX = grid[0];
  li.gridDimY = grid[1];
  li.gridDimZ = grid[2];
  li.blockDimX = threads;
  li.blockDimY = li.blockDimZ = 1;
  li.sharedMemBytes = shared_bytes;
  li.paramCount = params.size();
  li.pParams = params.data();
  record(f, work, name, [&] { vkCmdCuLaunchKernelNVX(f.cmd, &li); });
}

template <class Command>
void LazyQueue::record(Frame& f, double work, std::string_view name, Command&& command) {
  // Profiled: both timestamps at the bottom of the pipe, i.e. after all earlier commands / this dispatch
  // complete, so overlapping dispatches are not counted twice.
  const bool timed = f.profiled && f.names.size() * 2 + 2 <= f.query_capacity;
  const auto q = static_cast<uint32_t>(f.names.size() * 2);
  if (timed) vkCmdWriteTimestamp(f.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, f.queries.get(), q);
  command();
  if (timed) {
    vkCmdWriteTimestamp(f.cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, f.queries.get(), q + 1);
    f.names.emplace_back(name.empty() ? std::string_view("unnamed") : name);
  }
  ++stats_.dispatches;
  ++f.ops;
  f.work += work;
  const bool queries_full = f.profiled && f.names.size() * 2 + 2 > f.query_capacity;
  const int64_t limit = ops_limit_ > 0 ? ops_limit_ : policy_.max_ops;
  if ((!hold_ && (f.ops >= limit || f.work >= policy_.max_work)) || queries_full) flush();
  if (policy_.sync_each) sync();
}

StagingRing::Slice LazyQueue::staging(VkDeviceSize n) {
  while (true) {
    const uint64_t v = recording().value;
    if (auto s = ring_.try_allocate(n, v)) return *s;
    retire();
    if (auto s = ring_.try_allocate(n, v)) return *s;
    if (ring_.empty()) throw VkError(fmt::format("[vk] {} bytes do not fit the staging ring", n), VK_ERROR_UNKNOWN);
    // Full: the oldest slices belong to the recording (submit it) or to an in-flight submission (wait).
    if (ring_.oldest_value() >= v) flush();
    wait_value(ring_.oldest_value());
    throw_pending();
  }
}

void LazyQueue::upload(const std::shared_ptr<GpuBuffer>& dst, const void* src, size_t nbytes) {
  if (error_ != VK_SUCCESS) return;
  const VkDeviceSize chunk = ring_.capacity() / 2;
  for (size_t done = 0; done < nbytes;) {
    const size_t n = static_cast<size_t>(std::min<VkDeviceSize>(chunk, nbytes - done));
    const auto s = staging(n);
    std::memcpy(s.ptr, static_cast<const std::byte*>(src) + done, n);  // host write: visible at submit
    Frame& f = recording();
    const Binding use{dst, true};
    track(f, {&use, 1});
    const VkBufferCopy region{s.offset, dst->offset() + done, n};
    vkCmdCopyBuffer(f.cmd, ring_.buffer(), dst->buffer(), 1, &region);
    done += n;
    stats_.bytes_up += static_cast<int64_t>(n);
  }
}

namespace {
// A copy's writes made visible to the host's reads after the submission's wait.
void host_read_barrier(VkCommandBuffer cmd) {
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
}
}  // namespace

void LazyQueue::download(const std::shared_ptr<GpuBuffer>& src, void* dst, size_t nbytes) {
  throw_pending();
  ++stats_.host_reads;
  const VkDeviceSize chunk = ring_.capacity() / 2;
  for (size_t done = 0; done < nbytes;) {
    const size_t n = static_cast<size_t>(std::min<VkDeviceSize>(chunk, nbytes - done));
    const auto s = staging(n);
    Frame& f = recording();
    const Binding use{src, false};
    track(f, {&use, 1});
    const VkBufferCopy region{src->offset() + done, s.offset, n};
    vkCmdCopyBuffer(f.cmd, src->buffer(), ring_.buffer(), 1, &region);
    host_read_barrier(f.cmd);  // RAW: the host reads the staging slice after the wait
    const uint64_t v = f.value;
    flush();
    wait_value(v);
    throw_pending();
    std::memcpy(static_cast<std::byte*>(dst) + done, s.ptr, n);
    done += n;
    stats_.bytes_down += static_cast<int64_t>(n);
  }
}

LazyQueue::ReadTicket LazyQueue::download_async(const std::shared_ptr<GpuBuffer>& src, size_t nbytes) {
  throw_pending();
  constexpr VkDeviceSize kSlots = 64 * 1024;  // a few small reads in flight (a step's stats: 16 bytes)
  if (!readback_) readback_.emplace(dev_, kSlots);
  Frame& f = recording();
  const auto s = readback_->try_allocate(nbytes, f.value);
  if (!s) throw VkError(fmt::format("[vk] {} bytes of unread asynchronous read-backs: read() them first", kSlots),
                        VK_ERROR_UNKNOWN);
  const Binding use{src, false};
  track(f, {&use, 1});
  const VkBufferCopy region{src->offset(), s->offset, nbytes};
  vkCmdCopyBuffer(f.cmd, src->buffer(), readback_->buffer(), 1, &region);
  host_read_barrier(f.cmd);  // RAW: the host reads the slot after its submission completes
  const ReadTicket t{f.value, s->ptr, nbytes};
  flush();  // the GPU runs up to the copy while the host records what follows
  return t;
}

void LazyQueue::read(ReadTicket& t, void* dst) {
  ALPHA_CHECK(t.value != 0 && readback_, ValueError, "[vk] read of an empty read-back ticket");
  ++stats_.host_reads;
  // What is recorded so far goes first (an overlapped step's forward): the GPU runs it while the host waits, instead
  // of idling from the read-back's submission to the next flush.
  if (!hold_) flush();
  wait_value(t.value);  // this submission only: what was submitted after it keeps running
  throw_pending();
  std::memcpy(dst, t.ptr, t.nbytes);
  stats_.bytes_down += static_cast<int64_t>(t.nbytes);
  readback_->retire(t.value);
  t = ReadTicket{};
}

void LazyQueue::hold(bool on) {
  if (hold_ && !on) flush();  // the held work starts now
  hold_ = on;
}

void LazyQueue::flush() {
  if (!rec_) return;
  std::unique_ptr<Frame> f = std::move(rec_);
  // Bottom of the pipe: after every command of this submission completes.
  if (f->edge_timed) vkCmdWriteTimestamp(f->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, f->edges.get(), 1);
  VkResult r = vkEndCommandBuffer(f->cmd);
  bool injected = false;
  if (r == VK_SUCCESS && injected_ != VK_SUCCESS) r = std::exchange(injected_, VK_SUCCESS);
  if (r == VK_SUCCESS) {
    VkTimelineSemaphoreSubmitInfo ts{};
    ts.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO;
    ts.signalSemaphoreValueCount = 1;
    ts.pSignalSemaphoreValues = &f->value;
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.pNext = &ts;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &f->cmd;
    si.signalSemaphoreCount = 1;
    const VkSemaphore sem = timeline_.get();
    si.pSignalSemaphores = &sem;
    if (f->edge_timed && submitted_value_ > 0) {  // has the GPU run out of work while the host recorded this?
      uint64_t done = 0;
      if (vkGetSemaphoreCounterValue(dev_->get(), timeline_.get(), &done) == VK_SUCCESS && done >= submitted_value_)
        ++stats_.starved_submissions;
    }
    // Injected before the call: a submission that "failed" must not run.
    injected = fault::fire(fault::Point::submit);
    r = injected ? VK_ERROR_DEVICE_LOST : vkQueueSubmit(dev_->queue(), 1, &si, VK_NULL_HANDLE);
  }
  ++next_value_;
  if (r != VK_SUCCESS) {
    // The frame's work never runs; its buffers are released with it.
    fail(r, injected ? "vkQueueSubmit (injected by ALPHA_VK_FAULT)" : "vkQueueSubmit");
    return;
  }
  submitted_value_ = f->value;
  ++stats_.submissions;
  if (drained_at_ != std::chrono::steady_clock::time_point{}) {
    stats_.restart_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - drained_at_).count();
    ++stats_.restarts;
    drained_at_ = {};
    restart_recorded_ = false;
  }
  if (ops_limit_ > 0) ops_limit_ = std::min(2 * ops_limit_, policy_.max_ops);
  in_flight_.push_back(std::move(f));
}

void LazyQueue::sync() {
  throw_pending();
  flush();
  if (submitted_value_) wait_value(submitted_value_);
  ++stats_.syncs;
  throw_pending();
  retire();
}

void LazyQueue::retire() {
  if (error_ != VK_SUCCESS) return;
  uint64_t done = 0;
  const bool injected = fault::fire(fault::Point::poll);
  const VkResult r = injected ? VK_ERROR_DEVICE_LOST : vkGetSemaphoreCounterValue(dev_->get(), timeline_.get(), &done);
  if (r != VK_SUCCESS)
    return fail(r, injected ? "vkGetSemaphoreCounterValue (injected by ALPHA_VK_FAULT)" : "vkGetSemaphoreCounterValue");
  while (!in_flight_.empty() && in_flight_.front()->value <= done) {
    std::unique_ptr<Frame> f = std::move(in_flight_.front());
    in_flight_.pop_front();
    f->retained.clear();  // the last references to freed tensors' buffers: back to the pool
    read_timestamps(*f);
    read_edges(*f);
    recycle(*f);
    spare_.push_back(std::move(f));
  }
  ring_.retire(done);
}

void LazyQueue::recycle(Frame& f) {
  const auto t0 = std::chrono::steady_clock::now();
  VK_CHECK(vkResetCommandPool(dev_->get(), f.pool.get(), 0));
  for (size_t i = 0; i < f.dpools.size() && i <= f.dpool_next; ++i)
    VK_CHECK(vkResetDescriptorPool(dev_->get(), f.dpools[i].get(), 0));
  f.dpool_next = 0;
  f.ops = 0;
  f.work = 0;
  stats_.recycle_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

void LazyQueue::read_timestamps(Frame& f) {
  if (f.names.empty()) return;
  const auto n = static_cast<uint32_t>(f.names.size() * 2);
  std::vector<uint64_t> ts(n);
  // The frame's timeline value is reached, so WAIT returns at once; it only guards against a lagging driver.
  const VkResult r = vkGetQueryPoolResults(dev_->get(), f.queries.get(), 0, n, n * sizeof(uint64_t), ts.data(),
                                           sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (r != VK_SUCCESS) {
    f.names.clear();
    return fail(r, "vkGetQueryPoolResults");
  }
  for (size_t i = 0; i < f.names.size(); ++i) {
    const uint64_t ticks = (ts[2 * i + 1] - ts[2 * i]) & timestamp_mask_;  // masked: wraps within the valid bits
    kernel_ns_[f.names[i]] += static_cast<double>(ticks) * timestamp_period_ns_;
  }
  f.names.clear();
}

void LazyQueue::read_edges(Frame& f) {
  if (!f.edge_timed) return;
  f.edge_timed = false;
  uint64_t ts[2] = {0, 0};
  const VkResult r = vkGetQueryPoolResults(dev_->get(), f.edges.get(), 0, 2, sizeof(ts), ts, sizeof(uint64_t),
                                           VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
  if (r != VK_SUCCESS) return fail(r, "vkGetQueryPoolResults");
  const auto ns = [&](uint64_t ticks) { return static_cast<int64_t>(static_cast<double>(ticks) * timestamp_period_ns_); };
  stats_.gpu_busy_ns += ns((ts[1] - ts[0]) & timestamp_mask_);  // masked: wraps within the valid bits
  // Frames retire in submission order, so the gap is to the previous submission's end; a start before that end
  // (another queue's clock domain, a driver that overlaps submissions) counts as no gap.
  const uint64_t gap = (ts[0] - last_end_tick_) & timestamp_mask_;
  if (last_end_tick_ != 0 && gap <= timestamp_mask_ / 2) stats_.gpu_gap_ns += ns(gap);
  last_end_tick_ = ts[1];
  ++stats_.edge_submissions;
}

void LazyQueue::wait_value(uint64_t v) {
  if (error_ != VK_SUCCESS || v > submitted_value_) return;  // never submitted: nothing to wait for
  VkSemaphoreWaitInfo wi{};
  wi.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
  const VkSemaphore sem = timeline_.get();
  wi.semaphoreCount = 1;
  wi.pSemaphores = &sem;
  wi.pValues = &v;
  const auto t0 = std::chrono::steady_clock::now();
  const bool lost = fault::fire(fault::Point::wait), timed_out = fault::fire(fault::Point::wait_timeout);
  const uint64_t timeout_ns = fault::wait_timeout_ns();
  VkResult r = VK_NOT_READY;
  if (policy_.spin_wait_us > 0 && !lost && !timed_out) {
    const auto until = t0 + std::chrono::nanoseconds(static_cast<int64_t>(policy_.spin_wait_us * 1e3));
    for (uint64_t done = 0; r == VK_NOT_READY;) {
      if (const VkResult q = vkGetSemaphoreCounterValue(dev_->get(), timeline_.get(), &done); q != VK_SUCCESS) r = q;
      else if (done >= v) r = VK_SUCCESS;
      else if (std::chrono::steady_clock::now() >= until) break;
    }
  }
  if (r == VK_NOT_READY)
    r = lost ? VK_ERROR_DEVICE_LOST : timed_out ? VK_TIMEOUT : vkWaitSemaphores(dev_->get(), &wi, timeout_ns);
  stats_.wait_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  if (r == VK_TIMEOUT) {  // finite waits: a GPU that makes no progress for that long is treated as lost
    hung_ = true;
    fail(VK_ERROR_DEVICE_LOST, fmt::format("vkWaitSemaphores (no progress within {} s, ALPHA_VK_TIMEOUT_S: timed out{})",
                                           static_cast<double>(timeout_ns) / 1e9,
                                           timed_out ? ", injected by ALPHA_VK_FAULT" : "").c_str());
  } else if (r != VK_SUCCESS) {
    fail(r, lost ? "vkWaitSemaphores (injected by ALPHA_VK_FAULT)" : "vkWaitSemaphores");
  }
  // Drained (a read-back or sync): the GPU idles until the next submission, so the next ones start small.
  if (v == submitted_value_ && policy_.ramp_ops > 0) ops_limit_ = std::min(policy_.ramp_ops, policy_.max_ops);
  if (v == submitted_value_ && !rec_) drained_at_ = std::chrono::steady_clock::now();
  retire();
}

void LazyQueue::fail(VkResult r, const char* what) {
  if (error_ != VK_SUCCESS) return;
  error_ = r;
  error_what_ = what;
  // Drop unsubmitted work: nothing will run it.
  rec_.reset();
}

void LazyQueue::throw_pending() const {
  if (error_ == VK_SUCCESS) return;
  const std::string msg = fmt::format("[vk] asynchronous error from {}: {} (the device is unusable now)",
                                      error_what_, result_name(error_));
  if (error_ == VK_ERROR_DEVICE_LOST) {
    const std::string report = fault::device_fault_report(*dev_);
    throw DeviceLostError(
        fmt::format("{}; {}", msg, report.empty() ? "no VK_EXT_device_fault report (extension not available)" : report),
        error_);
  }
  if (error_ == VK_ERROR_OUT_OF_DEVICE_MEMORY || error_ == VK_ERROR_OUT_OF_HOST_MEMORY)
    throw OutOfMemoryError(msg, error_);
  throw VkError(msg, error_);
}

}  // namespace alpha::vk
