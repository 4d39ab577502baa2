// The lazy queue. Ops are recorded into a command buffer, not run at once. Flush policy (documented,
// Policy below): a recording is submitted when it holds max_ops dispatches or max_work flops/elements,
// when the staging ring needs space back, and at every sync point (a read-back: the host needs data;
// sync()). Each submission signals the next value of one timeline semaphore; the buffers and staging
// slices it uses stay alive until that value completes. An asynchronous read-back (download_async, then read)
// waits for its own submission's value only, so the host can record more work before it reads.
//
// Barriers only between dependent commands: every buffer remembers the barrier epoch in which it was
// last written / read; a command that reads a buffer written in the current epoch (RAW), or writes one
// written or read in it (WAW/WAR), first records one memory barrier and starts a new epoch.
//
// Profiling (set_profiling): each dispatch is bracketed by two timestamps in a per-frame query pool, read
// back when the frame retires (its timeline value is reached: no extra stall) and summed per kernel name.
// Edge timing (set_edge_timing): one timestamp where each submission starts and one where it ends, so the GPU's
// busy time and its idle gaps between submissions (host-bound stretches, submission boundaries) add up per step.
//
// Asynchronous errors (device lost, out of memory at submit or wait) become sticky and are thrown as typed
// exceptions at the next sync point; recording after one is a no-op. Host waits are finite
// (ALPHA_VK_TIMEOUT_S): one that runs out is a lost device; on GPUs they poll before they block
// (Policy::spin_wait_us). Fault injection points: vk/fault.h.
#pragma once
#include <volk.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <optional>
#include <string_view>
#include <vector>

#include "vk/device.h"
#include "vk/handles.h"
#include "vk/memory.h"
#include "vk/pipeline.h"
#include "vk/staging.h"

namespace alpha::vk {

struct Binding {
  std::shared_ptr<GpuBuffer> buf;
  bool write = false;
  // A write to a window of buf that no other write since the last barrier touches (cat's inputs into their windows
  // of a fresh output): no write-after-write barrier. Reads of buf afterwards still wait for it.
  bool disjoint = false;
};

class LazyQueue {
 public:
  struct Policy {
    // NVIDIA's driver drains a submission before it starts the next, so a boundary serializes the dispatches around
    // it (and costs ~10-30 us of idle GPU); too few boundaries leave the GPU waiting for the host to record. GPT-2 124M
    // step on an H100, two rounds (docs/PERFORMANCE.md, session 40): (32, 1e11) 31.0-31.2 ms, (64, 1e13) 30.7-30.9,
    // (128, 1e13) 30.6-31.0, (256, 1e13) 30.8-30.9; shakespeare_char within 1% for all.
    int64_t max_ops = 128;   // dispatches per submission: keeps the GPU fed while the host records more
    double max_work = 1e13;  // ~flops per submission: bounds the latency of one submission
    // At the start and after a host wait that drained it the GPU is idle: the first submission closes after
    // ramp_ops dispatches and each next one may hold twice as many, up to max_ops (0: max_ops throughout).
    int64_t ramp_ops = 4;
    VkDeviceSize staging_bytes = VkDeviceSize{32} << 20;
    // Host waits poll the timeline for up to this long before they block in the driver: a blocked thread wakes tens
    // of microseconds after the GPU finishes, and the GPU idles until the host submits again (CUDA's default spins
    // too). GPT-2 step on an H100 -0.1 to -0.3 ms (session 40). 0: block at once; CPU devices (lavapipe) never spin,
    // the spinning thread would take a core from the device's own.
    double spin_wait_us = 2e5;
    bool spin_on_cpu_device = false;  // ALPHA_VK_SPIN_US sets the spin on every device (tests: lavapipe)
    // Debugging aids (ALPHA_VK_DEBUG=barriers|sync, read by Runtime): a barrier before every command, or a
    // host wait after every dispatch. Results must not change with them; if they do, a hazard is missed.
    bool barrier_all = false;
    bool sync_each = false;
    // ALPHA_VK_DEBUG=allstages: with the PTX path on, every barrier orders all commands, not only those next to a
    // PTX launch (the scoping before session 58; A/B runs and hazard hunts).
    bool cu_all_stages = false;
  };
  struct Stats {
    int64_t submissions = 0;  // flushes that submitted work
    int64_t dispatches = 0;
    int64_t barriers = 0;
    int64_t syncs = 0;        // host waits for the queue
    int64_t host_reads = 0;   // downloads (read-backs): each flushes and waits for the GPU
    int64_t bytes_up = 0, bytes_down = 0;
    int64_t wait_ns = 0;      // host time spent waiting for the GPU
    int64_t query_pools = 0;  // timestamp query pools created (profiling only)
    // Edge timing only (set_edge_timing): GPU ns from each timed submission's start to its end, and between the end
    // of one and the start of the next; submissions made when the GPU had already finished every earlier one.
    int64_t edge_submissions = 0;
    int64_t gpu_busy_ns = 0, gpu_gap_ns = 0;
    int64_t starved_submissions = 0;
    // Host ns from a wait that drained the GPU to the next submission (the GPU idles meanwhile), and those restarts;
    // host ns spent recycling retired submissions (command and descriptor pools).
    // Of restart_ns, the part before the first command was recorded (host work that records nothing).
    int64_t restart_ns = 0, restarts = 0, restart_first_ns = 0;
    int64_t recycle_ns = 0;
  };

  LazyQueue(std::shared_ptr<Device> dev, Policy policy);
  ~LazyQueue();
  LazyQueue(const LazyQueue&) = delete;
  LazyQueue& operator=(const LazyQueue&) = delete;

  // Records one dispatch; bindings are descriptor bindings 0..n-1 (whole buffer ranges).
  // `name` labels the dispatch in the per-kernel GPU times when profiling.
  void dispatch(const ComputePipeline& p, std::span<const Binding> bindings, const void* push,
                std::array<uint32_t, 3> groups, double work, std::string_view name = {});
  // Records one PTX kernel launch (VK_NVX_binary_import, vk/nvx.h): params are its arguments (pointers to them, as
  // cuLaunchKernel takes); bindings name the buffers behind its pointer arguments, for the same barriers as dispatch.
  void launch_cu(VkCuFunctionNVX fn, std::span<const Binding> bindings, std::span<const void* const> params,
                 std::array<uint32_t, 3> grid, uint32_t threads, uint32_t shared_bytes, double work,
                 std::string_view name = {});
  void upload(const std::shared_ptr<GpuBuffer>& dst, const void* src, size_t nbytes);   // queued copy
  void download(const std::shared_ptr<GpuBuffer>& src, void* dst, size_t nbytes);      // sync point
  // A read-back that waits for its own submission only: download_async queues the copy of src's first nbytes into
  // a host-visible slot of its own and submits; read() first submits what was recorded since (unless held), then
  // waits for the ticket's submission alone (later work keeps the GPU busy) and copies the bytes out. Tickets are read
  // in the order they were taken, each once.
  struct ReadTicket {
    uint64_t value = 0;  // 0: none
    std::byte* ptr = nullptr;
    size_t nbytes = 0;
  };
  ReadTicket download_async(const std::shared_ptr<GpuBuffer>& src, size_t nbytes);
  void read(ReadTicket& t, void* dst);  // t becomes empty
  void flush();  // submits the recording (no wait)
  void sync();   // flush + wait for all work; throws a pending asynchronous error
  // Waits for what was submitted, even after an error, without throwing (teardown); after a wait that timed out
  // only one more second. False: the GPU may still be running submitted work.
  bool wait_idle_quietly() noexcept;

  const Policy& policy() const { return policy_; }
  // While held, max_ops / max_work do not end the recording: the commands recorded meanwhile share one submission
  // (a new submission starts after the previous one drains on NVIDIA's driver; within one, unbarriered dispatches
  // overlap). Releasing submits what was held.
  void hold(bool on);
  const Stats& stats() const { return stats_; }
  void inject_submit_error(VkResult r) { injected_ = r; }  // test hook: the next submission fails with r

  // Timestamp profiling; returns whether it is on. Unavailable (no compute-queue timestamps) -> stays off.
  bool set_profiling(bool on);
  bool profiling() const { return profiling_; }
  bool profiling_available() const { return timestamp_mask_ != 0; }
  // Submission-edge timestamps (Stats::gpu_busy_ns, gpu_gap_ns); cheap enough to leave on for a whole run.
  bool set_edge_timing(bool on);
  // GPU nanoseconds per kernel name over all retired profiled dispatches (grows only).
  const std::map<std::string, double>& kernel_ns() const { return kernel_ns_; }

 private:
  struct Frame {
    CommandPool pool;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    std::vector<DescriptorPool> dpools;
    size_t dpool_next = 0;
    std::vector<std::shared_ptr<GpuBuffer>> retained;
    uint64_t value = 0;
    int64_t ops = 0;
    double work = 0;
    QueryPool queries;               // 2 timestamps per dispatch; created on the first profiled recording
    uint32_t query_capacity = 0;
    bool profiled = false;           // this recording reset `queries` and timestamps its dispatches
    std::vector<std::string> names;  // kernel of each timestamped dispatch, in query order
    QueryPool edges;                 // edge timing: [0] where the submission starts, [1] where it ends
    bool edge_timed = false;
  };
  Frame& recording();  // begins one if needed
  // Retains + barrier when dependent; cu: the command is a PTX launch (its barriers order all commands).
  void track(Frame& f, std::span<const Binding> uses, bool cu = false);
  // Records one dispatch-like command (between profiling timestamps) and counts it toward the flush policy.
  template <class Command> void record(Frame& f, double work, std::string_view name, Command&& command);
  VkDescriptorSet allocate_set(Frame& f, VkDescriptorSetLayout layout);
  void retire();                  // recycles completed frames and staging slices
  void recycle(Frame& f);         // resets a completed frame's command and descriptor pools for a new recording
  void wait_value(uint64_t v);    // host wait; throws DeviceLostError etc.
  StagingRing::Slice staging(VkDeviceSize n);  // waits for space when the ring is full
  void read_timestamps(Frame& f);  // f has completed
  void read_edges(Frame& f);       // f has completed
  void throw_pending() const;
  void fail(VkResult r, const char* what);  // records a sticky asynchronous error

  std::shared_ptr<Device> dev_;  // first: destroyed last
  Policy policy_;
  bool hold_ = false;
  int64_t ops_limit_ = 0;  // this submission's dispatch limit (ramp_ops .. max_ops); 0: max_ops (no ramp)
  Stats stats_;
  Semaphore timeline_;
  StagingRing ring_;
  std::optional<StagingRing> readback_;  // download_async's slots, freed by read(): not by retire()
  std::unique_ptr<Frame> rec_;
  std::deque<std::unique_ptr<Frame>> in_flight_;
  std::vector<std::unique_ptr<Frame>> spare_;
  uint64_t next_value_ = 1, submitted_value_ = 0;
  uint64_t epoch_ = 1;
  bool cu_in_epoch_ = false;  // a PTX launch was recorded since the last barrier
  VkResult error_ = VK_SUCCESS, injected_ = VK_SUCCESS;
  std::string error_what_;
  bool hung_ = false;  // a wait timed out: the destructor abandons the device rather than wait forever
  bool profiling_ = false;
  bool edge_timing_ = false;
  uint64_t last_end_tick_ = 0;
  std::chrono::steady_clock::time_point drained_at_{};  // when the last wait drained the GPU; epoch: not drained
  bool restart_recorded_ = false;  // since drained_at_, a command was recorded  // end timestamp of the last retired edge-timed submission; 0: none yet
  uint64_t timestamp_mask_ = 0;  // valid bits of the queue's timestamps; 0: no timestamps
  double timestamp_period_ns_ = 0;
  std::map<std::string, double> kernel_ns_;
};

}  // namespace alpha::vk
