// GPU faults (issue 9): every ALPHA_VK_FAULT injection point (vk/fault.h) makes `alpha train` on the Vulkan
// device (lavapipe in CI, every op on the GPU) exit with code 6 within seconds of the fault, with a "[vk]"
// message naming the failure, and leaves the checkpoints already written byte-identical and resumable.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "cli/cli.h"
#include "loop/run_checkpoint.h"
#include "test_util.h"
#include "vk/fault.h"

using namespace alpha;
using namespace alpha::test;
namespace fs = std::filesystem;
namespace fault = alpha::vk::fault;

namespace {

// Every op on the GPU (thresholds 0), a checkpoint every 2 steps.
const std::vector<std::string> kGpuSets = {"--quiet", "--set", "device=vulkan", "--set", "dispatch.threshold=0",
                                           "--set", "dispatch.matmul_threshold=0", "--set", "checkpoint.interval=2",
                                           "--set", "train.eval_interval=2", "--set", "train.sample_tokens=0"};

std::vector<std::string> train_args(const std::string& cfg, int64_t steps, bool resume) {
  std::vector<std::string> a = {"train", cfg};
  a.insert(a.end(), kGpuSets.begin(), kGpuSets.end());
  a.insert(a.end(), {"--set", "train.max_steps=" + std::to_string(steps)});
  if (resume) a.push_back("--resume");
  return a;
}

// name -> bytes of the checkpoint files (ckpt-*, temp files included, and `latest`) in a run folder.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> m;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0 || name == "latest") m[name] = read_file(e.path());
  }
  return m;
}

// Sets an environment variable for the lifetime of the guard.
struct Env {
  std::string name;
  Env(const std::string& n, const std::string& v) : name(n) { setenv(n.c_str(), v.c_str(), 1); }
  ~Env() { unsetenv(name.c_str()); }
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
};

bool is_oom_point(fault::Point p) {
  return p == fault::Point::alloc_slab || p == fault::Point::staging || p == fault::Point::command_buffer ||
         p == fault::Point::descriptor_pool || p == fault::Point::pipeline;
}

// The Vulkan call each point stands for (the message must name it).
const char* call_of(fault::Point p) {
  switch (p) {
    case fault::Point::alloc_slab: return "cannot allocate";  // the pool's message: size, heap, budget
    case fault::Point::staging: return "staging ring";
    case fault::Point::command_buffer: return "vkAllocateCommandBuffers";
    case fault::Point::descriptor_pool: return "vkCreateDescriptorPool";
    case fault::Point::pipeline: return "vkCreateComputePipelines";
    case fault::Point::submit: return "vkQueueSubmit";
    case fault::Point::wait: return "vkWaitSemaphores";
    case fault::Point::wait_timeout: return "ALPHA_VK_TIMEOUT_S";
    case fault::Point::poll: return "vkGetSemaphoreCounterValue";
  }
  return "?";
}

}  // namespace

TEST_CASE("ALPHA_VK_FAULT parsing: point:N fails from the Nth pass on; unknown points and N=0 are rejected") {
  fault::configure("submit:3,wait:1");
  CHECK_FALSE(fault::fire(fault::Point::submit));
  CHECK_FALSE(fault::fire(fault::Point::submit));
  CHECK(fault::fire(fault::Point::submit));
  CHECK(fault::fire(fault::Point::submit));  // stays failed, like a lost device
  CHECK(fault::fire(fault::Point::wait));
  CHECK_FALSE(fault::fire(fault::Point::poll));
  CHECK(fault::passes(fault::Point::submit) == 4);
  CHECK(fault::fired() == 3);
  CHECK_THROWS_WITH_AS(fault::configure("submitt:1"), doctest::Contains("alloc_slab, staging"), ValueError);
  CHECK_THROWS_AS(fault::configure("submit:0"), ValueError);
  CHECK_THROWS_AS(fault::configure("submit"), ValueError);
  CHECK_THROWS_AS(fault::configure("submit:x"), ValueError);
  fault::configure("");
  CHECK_FALSE(fault::fire(fault::Point::submit));
  CHECK(fault::fired() == 0);
}

TEST_CASE("ALPHA_VK_TIMEOUT_S: finite waits, 60 s by default, bad values rejected") {
  unsetenv("ALPHA_VK_TIMEOUT_S");
  CHECK(fault::wait_timeout_ns() == uint64_t{60} * 1000 * 1000 * 1000);
  {
    Env e("ALPHA_VK_TIMEOUT_S", "0.5");
    CHECK(fault::wait_timeout_ns() == uint64_t{500} * 1000 * 1000);
  }
  for (const char* bad : {"0", "-1", "abc", "1e9"}) {
    Env e("ALPHA_VK_TIMEOUT_S", bad);
    CHECK_THROWS_AS(fault::wait_timeout_ns(), ValueError);
  }
}

TEST_CASE("GPU faults: 9 injection points on lavapipe, each exit 6 within 5 s, checkpoints byte-identical") {
  TempDir d;
  const std::string cfg = tiny_config(d.path);
  const fs::path run = d.path / "run";
  std::string err;
  // Clean run: checkpoints at steps 2 and 4; its pass counts place each fault mid-way through the resumed run.
  REQUIRE_MESSAGE(cli(train_args(cfg, 4, false), &err) == kExitOk, err);
  std::map<fault::Point, int64_t> clean;
  for (size_t i = 0; i < fault::kPointNames.size(); ++i) {
    const auto p = static_cast<fault::Point>(i);
    clean[p] = fault::passes(p);
  }
  REQUIRE(fs::exists(run / "ckpt-00000004.alph"));
  const auto before = snapshot(run);

  double slowest_ms = 0;
  int clean_exits = 0;
  for (size_t i = 0; i < fault::kPointNames.size(); ++i) {
    const auto p = static_cast<fault::Point>(i);
    const std::string name(fault::kPointNames[i]);
    CAPTURE(name);
    // The wait_timeout point shares vkWaitSemaphores with `wait`: its passes are counted alike.
    const int64_t n = std::max<int64_t>(1, clean[p] / 2);
    int rc = 0;
    std::chrono::steady_clock::time_point done;
    {
      Env e("ALPHA_VK_FAULT", name + ":" + std::to_string(n));
      rc = cli(train_args(cfg, 8, true), &err);
      done = std::chrono::steady_clock::now();
    }
    CAPTURE(err);
    REQUIRE_MESSAGE(fault::fired() >= 1, name << ":" << n << " never fired (" << clean[p] << " passes in the clean run)");
    const double ms = std::chrono::duration<double, std::milli>(done - fault::first_fired_at()).count();
    slowest_ms = std::max(slowest_ms, ms);
    MESSAGE(name << ":" << n << " (of " << clean[p] << " passes in the clean run) -> exit " << rc << " "
                 << static_cast<int>(ms) << " ms after the fault");
    CHECK(rc == kExitGpuFault);
    CHECK(ms < 5000);
    CHECK(err.find("[vk]") != std::string::npos);
    CHECK(err.find(call_of(p)) != std::string::npos);
    CHECK(err.find("ALPHA_VK_FAULT") != std::string::npos);  // says the fault was injected
    if (is_oom_point(p)) {
      CHECK(err.find("VK_ERROR_OUT_OF_DEVICE_MEMORY") != std::string::npos);
      CHECK(err.find("GPU fault: out of memory") != std::string::npos);
    } else {
      CHECK(err.find("VK_ERROR_DEVICE_LOST") != std::string::npos);
      CHECK(err.find("VK_EXT_device_fault") != std::string::npos);  // its report, or that there is none
    }
    if (p == fault::Point::alloc_slab || p == fault::Point::staging) {  // size, heap and budget
      CHECK(err.find("bytes") != std::string::npos);
      CHECK(err.find("heap 0") != std::string::npos);
      CHECK(err.find("budget") != std::string::npos);
    }
    // Checkpoints written before the fault: byte-identical, no temp files left, `latest` loads.
    const auto after = snapshot(run);
    for (const auto& [file, bytes] : before) {
      CAPTURE(file);
      REQUIRE(after.count(file) == 1);
      if (file != "latest") CHECK(after.at(file) == bytes);
    }
    for (const auto& [file, bytes] : after) CHECK_MESSAGE(file.find(".tmp") == std::string::npos, file);
    CHECK_NOTHROW(load_run_checkpoint(find_resume_checkpoint(run.string(), "")));
    clean_exits += rc == kExitGpuFault && ms < 5000;
    // Back to the clean run's files, so every point starts from the same state.
    for (const auto& [file, bytes] : after)
      if (!before.count(file)) fs::remove(run / file);
    write_file(run / "latest", before.at("latest"));
  }
  MESSAGE("faults injected: " << fault::kPointNames.size() << " sites, " << clean_exits
                              << " clean exits (code 6), slowest " << static_cast<int>(slowest_ms)
                              << " ms after the fault");
  CHECK(clean_exits == static_cast<int>(fault::kPointNames.size()));
  // The untouched checkpoints still resume to the end.
  REQUIRE_MESSAGE(cli(train_args(cfg, 8, true), &err) == kExitOk, err);
  CHECK(fs::exists(run / "ckpt-00000008.alph"));
}

TEST_CASE("a real wait timeout (ALPHA_VK_TIMEOUT_S=1e-9 on lavapipe) is a lost device: exit 6, checkpoints intact") {
  TempDir d;
  const std::string cfg = tiny_config(d.path);
  std::string err;
  REQUIRE_MESSAGE(cli(train_args(cfg, 2, false), &err) == kExitOk, err);
  const auto before = snapshot(d.path / "run");
  int rc = 0;
  const auto t0 = std::chrono::steady_clock::now();
  {
    Env e("ALPHA_VK_TIMEOUT_S", "1e-9");  // 1 ns: the first wait for unfinished GPU work runs out, no injection
    rc = cli(train_args(cfg, 6, true), &err);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CAPTURE(err);
  MESSAGE("real 1 ns wait timeout -> exit " << rc << " after " << s << " s (whole run, start-up included)");
  CHECK(rc == kExitGpuFault);
  CHECK(s < 10);
  CHECK(err.find("no progress within 1e-09 s") != std::string::npos);
  CHECK(err.find("injected") == std::string::npos);
  const auto after = snapshot(d.path / "run");
  for (const auto& [file, bytes] : before)
    if (file != "latest") CHECK(after.at(file) == bytes);
}

TEST_CASE("GPU fault in a real process: `alpha train` exits with status 6, no signal, in seconds") {
  TempDir d;
  const std::string cfg = tiny_config(d.path);
  std::string err;
  REQUIRE_MESSAGE(cli(train_args(cfg, 2, false), &err) == kExitOk, err);
  const auto before = snapshot(d.path / "run");
  std::vector<std::string> args = train_args(cfg, 6, true);
  args.insert(args.begin(), ALPHA_BINARY);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string fault_env = "ALPHA_VK_FAULT=submit:3";
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e) envp.push_back(*e);
  envp.push_back(fault_env.data());
  envp.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  REQUIRE(pid > 0);
  int status = 0;
  pid_t got = 0;
  for (int i = 0; i < 3000 && got == 0; ++i) {  // up to 30 s, then the child is killed
    got = waitpid(pid, &status, WNOHANG);
    if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (got == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL("alpha did not exit within 30 s of starting with a lost device");
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("child process with submit:3 exited in " << s << " s (whole run, start-up included)");
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == kExitGpuFault);
  CHECK(s < 10);
  const auto after = snapshot(d.path / "run");
  for (const auto& [file, bytes] : before)
    if (file != "latest") CHECK(after.at(file) == bytes);
}
