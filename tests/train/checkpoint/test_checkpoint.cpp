// Checkpoints: ALPH v2 round trip, bit-exact resume, every class of bad file rejected with its own message,
// retention, crash safety (failed writes, kill -9 during saves, SIGTERM), resume refusals, and safetensors
// export checked against PyTorch (tests/make_export_fixture.py) plus init_from.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "autograd/tape.h"
#include "checkpoint/checkpoint.h"
#include "cli/cli.h"
#include "loop/run_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "loop/trainer.h"
#include "tests/test_util.h"
#include "tests/train/model/model_check.h"

using namespace alpha;
namespace fs = std::filesystem;
using namespace alpha::test;

namespace {

// A small container file with f32, f64 and i32 tensors.
void write_sample(const fs::path& p) {
  NamedTensors t = {{"a", Tensor::from_vector(std::vector<float>{1.5f, -2.f, 3.25f, 0.f, 7.f, 8.f}, {2, 3})},
                    {"b", Tensor::from_vector(std::vector<double>{1e-300, 2.5}, {2})},
                    {"c", Tensor::from_vector(std::vector<int32_t>{-1, 2, 3}, {3})}};
  write_checkpoint(p.string(), {{"hello", "world"}, {"n", 42}}, t);
}

// Reassembles a file from a JSON header text and a data section, with a correct header checksum, so a test can
// reach the checks behind the checksum (bad JSON, bad tables).
std::string craft(const std::string& json, const std::string& data, uint32_t version = kCheckpointVersion) {
  std::string f(16, '\0');
  std::memcpy(f.data(), "ALPH", 4);
  std::memcpy(f.data() + 4, &version, 4);
  const uint64_t n = json.size();
  std::memcpy(f.data() + 8, &n, 8);
  f += json;
  const uint64_t h = fnv1a64(f.data(), f.size());
  f.append(reinterpret_cast<const char*>(&h), 8);
  f.resize((f.size() + 63) / 64 * 64, '\0');
  return f + data;
}

std::string table_json(const std::string& entries, uint64_t data_bytes) {
  return R"({"tensors": [)" + entries + R"(], "data_bytes": )" + std::to_string(data_bytes) + "}";
}

std::string entry(const std::string& name, const std::string& shape, uint64_t off, uint64_t nb, uint64_t sum) {
  return fmt::format(R"({{"name": "{}", "dtype": "f32", "shape": {}, "offset": {}, "nbytes": {}, "checksum": "{:016x}"}})",
                     name, shape, off, nb, sum);
}

std::string read_error(const fs::path& p) {
  try {
    read_checkpoint(p.string());
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("ALPH container round trip keeps metadata and every tensor byte") {
  TempDir d;
  write_sample(d.path / "x.alph");
  const CheckpointFile f = read_checkpoint((d.path / "x.alph").string());
  CHECK(f.meta["hello"] == "world");
  CHECK(f.meta["n"] == 42);
  REQUIRE(f.tensors.size() == 3);
  CHECK(f.get("a").to_f32_vector() == std::vector<float>{1.5f, -2.f, 3.25f, 0.f, 7.f, 8.f});
  CHECK(f.get("a").shape() == Shape{2, 3});
  CHECK(f.get("b").to_f64_vector() == std::vector<double>{1e-300, 2.5});
  CHECK(f.get("c").to_f64_vector() == std::vector<double>{-1, 2, 3});
  CHECK_THROWS_WITH_AS(f.get("zz"), doctest::Contains("missing tensor \"zz\""), CheckpointError);
  const std::string bytes = read_file(d.path / "x.alph");
  CHECK(bytes.substr(0, 4) == "ALPH");
  CHECK(fs::file_size(d.path / "x.alph") % 4 == 0);
  CHECK(!fs::exists(d.path / "x.alph.tmp"));
  // FNV-1a 64 reference values (from the published FNV test vectors).
  CHECK(fnv1a64("", 0) == 0xcbf29ce484222325ull);
  CHECK(fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
}

TEST_CASE("each handcrafted bad file is rejected with its own message") {
  TempDir d;
  const fs::path p = d.path / "bad.alph";
  write_sample(d.path / "good.alph");
  const std::string good = read_file(d.path / "good.alph");
  auto with = [&](std::string bytes) {
    write_file(p, bytes);
    return read_error(p);
  };
  std::string b = good;
  b[0] = 'X';
  CHECK(with(b).find("wrong magic") != std::string::npos);
  b = good;
  b[4] = 3;
  CHECK(with(b).find("unknown format version 3") != std::string::npos);
  CHECK(with(good.substr(0, 10)).find("truncated") != std::string::npos);
  CHECK(with(good.substr(0, good.size() - 1)).find("truncated") != std::string::npos);
  CHECK(with(good + std::string(3, '\0')).find("trailing bytes") != std::string::npos);
  b = good;
  const uint64_t huge = uint64_t(1) << 62;
  std::memcpy(b.data() + 8, &huge, 8);
  CHECK(with(b).find("header length 4611686018427387904 is longer than") != std::string::npos);
  b = good;
  b[20] ^= 1;  // inside the JSON header
  CHECK(with(b).find("header checksum mismatch") != std::string::npos);
  b = good;
  b[b.size() - 1] ^= 0x10;  // last tensor's data
  CHECK(with(b).find("checksum mismatch in tensor \"c\"") != std::string::npos);
  CHECK(with(craft("{\"tensors\": [", "")).find("bad JSON header") != std::string::npos);
  CHECK(with(craft("[1, 2]", "")).find("lacks the tensor table") != std::string::npos);

  const std::string data(128, '\0');
  const uint64_t zsum = fnv1a64(data.data(), 64);
  // Shape product overflow: 2^40 * 2^40 elements.
  CHECK(with(craft(table_json(entry("t", "[1099511627776, 1099511627776]", 0, 64, zsum), 128), data))
            .find("overflows") != std::string::npos);
  // Shape and nbytes disagree (a hostile nbytes must not size an allocation).
  CHECK(with(craft(table_json(entry("t", "[1000000000]", 0, 64, zsum), 128), data)).find("does not match shape") !=
        std::string::npos);
  // Offsets outside the data section.
  CHECK(with(craft(table_json(entry("t", "[16]", 128, 64, zsum), 128), data)).find("outside") != std::string::npos);
  CHECK(with(craft(table_json(entry("t", "[16]", 18446744073709551552ull, 64, zsum), 128), data)).find("outside") !=
        std::string::npos);
  // Overlapping tensors.
  CHECK(with(craft(table_json(entry("t", "[32]", 0, 128, fnv1a64(data.data(), 128)) + "," + entry("u", "[16]", 64, 64, zsum), 128), data))
            .find("overlap") != std::string::npos);
  // Duplicated names, unknown dtype, negative dims.
  CHECK(with(craft(table_json(entry("t", "[16]", 0, 64, zsum) + "," + entry("t", "[16]", 64, 64, zsum), 128), data))
            .find("appears twice") != std::string::npos);
  std::string e = entry("t", "[16]", 0, 64, zsum);
  e.replace(e.find("f32"), 3, "q8");
  CHECK(with(craft(table_json(e, 64), data.substr(0, 64))).find("unknown dtype") != std::string::npos);
  CHECK(with(craft(table_json(entry("t", "[-16]", 0, 64, zsum), 64), data.substr(0, 64))).find("bad shape") !=
        std::string::npos);
  // Non-zero padding between tensors is damage too (every byte of the file is covered).
  std::string padded = data;
  padded[40] = 1;
  CHECK(with(craft(table_json(entry("t", "[4]", 0, 16, fnv1a64(data.data(), 16)) + "," + entry("u", "[16]", 64, 64, zsum), 128), padded))
            .find("padding byte") != std::string::npos);
  CHECK(read_error(d.path / "nope.alph").find("cannot open") != std::string::npos);
  // A container that is not a training checkpoint: clear error from the run-level loader.
  CHECK_THROWS_WITH_AS(load_run_checkpoint((d.path / "good.alph").string()), doctest::Contains("not a training checkpoint"),
                       CheckpointError);
}

TEST_CASE("exact resume: k steps + resume equals the straight run bit for bit (losses, params, m, v)") {
  struct Case {
    int k;
    std::string set;
  };
  // k at an eval step with gradient accumulation, and k off the eval grid.
  for (const Case& c : {Case{6, "train.grad_accum=2"}, Case{5, "seed=9"}}) {
    CAPTURE(c.k);
    TempDir a, b;
    REQUIRE(cli({"train", tiny_config(a.path), "--quiet", "--set", c.set}) == kExitOk);
    const std::string cfg_b = tiny_config(b.path);
    REQUIRE(cli({"train", cfg_b, "--quiet", "--set", c.set, "--set", "train.max_steps=" + std::to_string(c.k)}) == kExitOk);
    REQUIRE(fs::exists(b.path / "run" / checkpoint_file_name(c.k)));
    std::string err;
    REQUIRE(cli({"train", cfg_b, "--quiet", "--set", c.set, "--resume"}, &err) == kExitOk);
    const fs::path ma = a.path / "run" / "metrics.jsonl", mb = b.path / "run" / "metrics.jsonl";
    const auto la = records(ma, "step", "loss"), lb = records(mb, "step", "loss");
    REQUIRE(la.size() == 12);
    CHECK(la == lb);
    CHECK(records(ma, "step", "step") == records(mb, "step", "step"));
    CHECK(records(mb, "resume", "step") == std::vector<double>{double(c.k)});
    // Evaluations at the eval grid (6, 12) agree too: the extra final eval of the short run used a copy.
    std::vector<double> eva = records(ma, "eval", "val_loss"), evb = records(mb, "eval", "val_loss");
    if (c.k % 6 != 0) evb.erase(evb.begin());
    CHECK(eva == evb);
    const auto sa = read_jsonl(ma).back(), sb = read_jsonl(mb).back();
    CHECK(sa["type"] == "end");
    const RunCheckpoint ca = load_run_checkpoint((a.path / "run" / checkpoint_file_name(12)).string());
    const RunCheckpoint cb = load_run_checkpoint((b.path / "run" / checkpoint_file_name(12)).string());
    REQUIRE(ca.file.tensors.size() == cb.file.tensors.size());
    for (size_t i = 0; i < ca.file.tensors.size(); ++i) {
      CAPTURE(ca.file.tensors[i].first);
      CHECK(ca.file.tensors[i].first == cb.file.tensors[i].first);
      CHECK(same_bytes(ca.file.tensors[i].second, cb.file.tensors[i].second));
    }
    CHECK(ca.optimizer_step == 12);
    CHECK(cb.optimizer_step == 12);
    CHECK(ca.state.data == cb.state.data);
    CHECK(ca.state.dropout == cb.state.dropout);
    CHECK(ca.state.tokens_seen == cb.state.tokens_seen);
  }
}

TEST_CASE("≥ 200 single-bit flips and ≥ 200 truncations of a real checkpoint are all rejected") {
  TempDir d;
  REQUIRE(cli({"train", tiny_config(d.path), "--quiet", "--set", "train.max_steps=2"}) == kExitOk);
  const fs::path src = d.path / "run" / checkpoint_file_name(2);
  const std::string good = read_file(src);
  REQUIRE_NOTHROW(load_run_checkpoint(src.string()));
  const fs::path p = d.path / "bad.alph";
  Rng rng(123);
  int rejected = 0;
  for (int i = 0; i < 200; ++i) {
    std::string b = good;
    const uint64_t bit = rng.below(b.size() * 8);
    b[bit / 8] = static_cast<char>(b[bit / 8] ^ (1 << (bit % 8)));
    write_file(p, b);
    try {
      read_checkpoint(p.string());
    } catch (const CheckpointError& e) {
      ++rejected;
    }
  }
  CHECK(rejected == 200);
  rejected = 0;
  for (int i = 0; i < 200; ++i) {
    write_file(p, good.substr(0, rng.below(good.size())));
    try {
      read_checkpoint(p.string());
    } catch (const CheckpointError& e) {
      ++rejected;
    }
  }
  CHECK(rejected == 200);
}

namespace {

struct SmallRun {
  Config cfg;
  std::unique_ptr<Tokenizer> tok = train_tokenizer("char", corpus());
  Rng rng{1};
  GPT model;
  AdamW opt;
  explicit SmallRun(const fs::path& dir)
      : model(GPTConfig{1, 2, 8, 8, 30, 0.0, true}, rng), opt(model.parameters(), AdamWOptions{}) {
    cfg.out_dir = (dir / "run").string();
    cfg.checkpoint.keep_last = 2;
  }
  std::string save(int64_t step, double val_loss, int64_t eval_step) {
    TrainState st;
    st.step = step;
    st.eval_step = eval_step;
    st.val_loss = val_loss;
    return save_run_checkpoint(cfg, *tok, model, opt, st);
  }
};

std::string latest_name(const fs::path& out) {
  std::string s = read_file(out / "latest");
  return s.substr(0, s.find('\n'));
}

// Starts the alpha binary (fork + immediate exec, so the child never runs this process's threads).
pid_t spawn_alpha(const std::vector<std::string>& args) {
  std::vector<std::string> all = {ALPHA_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Waits (up to 60 s) until the metrics file holds at least n step records.
bool wait_for_steps(const fs::path& metrics, size_t n) {
  for (int i = 0; i < 6000; ++i) {
    size_t steps = 0;
    std::ifstream f(metrics);
    for (std::string line; std::getline(f, line);) steps += line.find("\"type\":\"step\"") != std::string::npos;
    if (steps >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

TEST_CASE("retention keeps the last keep_last checkpoints plus the best by val loss") {
  TempDir d;
  SmallRun r(d.path);
  r.save(1, 2.0, 1);
  r.save(2, 0.5, 2);  // best, measured at its own step
  r.save(3, 0.1, 2);  // lower, but measured at step 2: not this checkpoint's own loss
  r.save(4, 1.5, 4);
  r.save(5, 1.4, 4);
  r.save(6, 1.3, 6);
  const fs::path out = d.path / "run";
  for (int s : {2, 5, 6}) CHECK_MESSAGE(fs::exists(out / checkpoint_file_name(s)), s);
  for (int s : {1, 3, 4}) CHECK_MESSAGE(!fs::exists(out / checkpoint_file_name(s)), s);
  CHECK(latest_name(out) == checkpoint_file_name(6));
  CHECK(find_resume_checkpoint(out.string(), "") == (out / checkpoint_file_name(6)).string());
}

TEST_CASE("a failed save (file size limit = disk full) or non-finite params never damage the last checkpoint") {
  TempDir d;
  SmallRun r(d.path);
  const fs::path out = d.path / "run";
  r.save(1, NAN, 0);
  const std::string before = read_file(out / checkpoint_file_name(1));
  write_file(out / "ckpt-00000000.alph.tmp", "stray temp file of a killed save");
  // RLIMIT_FSIZE makes write() fail with EFBIG past 1 KiB, like a full disk.
  struct rlimit old {};
  getrlimit(RLIMIT_FSIZE, &old);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 1024;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  std::string msg;
  try {
    r.save(2, NAN, 0);
  } catch (const CheckpointError& e) {
    msg = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  CHECK(msg.find("writing") != std::string::npos);
  CHECK(!fs::exists(out / checkpoint_file_name(2)));
  CHECK(!fs::exists(out / (checkpoint_file_name(2) + ".tmp")));
  CHECK(!fs::exists(out / "ckpt-00000000.alph.tmp"));  // the stray temp file went with the save attempt
  CHECK(latest_name(out) == checkpoint_file_name(1));
  CHECK(read_file(out / checkpoint_file_name(1)) == before);
  CHECK_NOTHROW(load_run_checkpoint((out / checkpoint_file_name(1)).string()));

  Tensor w = r.model.parameter("transformer.h.0.attn.c_attn.weight");
  w.mutable_data<float>()[3] = NAN;
  CHECK_THROWS_WITH_AS(r.save(3, NAN, 0), doctest::Contains("transformer.h.0.attn.c_attn.weight\" holds a non-finite"),
                       CheckpointError);
  CHECK(!fs::exists(out / checkpoint_file_name(3)));
  CHECK(latest_name(out) == checkpoint_file_name(1));
}

TEST_CASE("resume refuses a changed model, vocabulary or tokenizer naming the field; a missing checkpoint is an error") {
  TempDir d;
  const std::string cfg = tiny_config(d.path);
  std::string err;
  CHECK(cli({"train", cfg, "--quiet", "--resume"}, &err) == kExitCheckpoint);
  CHECK(err.find("nothing to resume") != std::string::npos);
  CHECK(!fs::exists(d.path / "run" / "metrics.jsonl"));  // no fresh start behind the user's back
  CHECK(cli({"train", cfg, "--quiet", "--resume", (d.path / "nope.alph").string()}, &err) == kExitCheckpoint);
  CHECK(err.find("nope.alph") != std::string::npos);
  REQUIRE(cli({"train", cfg, "--quiet", "--set", "train.max_steps=3"}) == kExitOk);
  for (const char* field : {"model.n_embd=32", "model.n_layer=2", "model.block_size=4", "model.bias=false",
                            "model.vocab_size=40"}) {
    CHECK(cli({"train", cfg, "--quiet", "--resume", "--set", field}, &err) == kExitCheckpoint);
    const std::string name = std::string(field).substr(0, std::string(field).find('='));
    CHECK_MESSAGE(err.find(name) != std::string::npos, err);
  }
  write_file(d.path / "other.txt", corpus(1));
  CHECK(cli({"train", cfg, "--quiet", "--resume", "--set", "data.path=" + (d.path / "other.txt").string()}, &err) ==
        kExitCheckpoint);
  CHECK(err.find("tokenizer") != std::string::npos);
  CHECK(cli({"train", cfg, "--quiet", "--resume", "--set", "train.max_steps=3"}, &err) == kExitUsage);
  CHECK(err.find("train.max_steps") != std::string::npos);
  // What may change: max_steps, lr, eval settings, dropout.
  CHECK(cli({"train", cfg, "--quiet", "--resume", "--set", "train.max_steps=4", "--set", "optim.lr=1e-3", "--set",
             "train.eval_iters=1", "--set", "model.dropout=0"}, &err) == kExitOk);
  // A damaged latest checkpoint is an error too, never a fresh start.
  const fs::path latest = d.path / "run" / checkpoint_file_name(4);
  std::string bytes = read_file(latest);
  bytes[bytes.size() / 2] ^= 4;
  write_file(latest, bytes);
  CHECK(cli({"train", cfg, "--quiet", "--resume", "--set", "train.max_steps=5"}, &err) == kExitCheckpoint);
  CHECK(err.find("checksum mismatch") != std::string::npos);
}

TEST_CASE("SIGTERM finishes the step, saves and stops; the CLI maps it to exit code 130") {
  TempDir d;
  const Config cfg = load_config(tiny_config(d.path), {"train.max_steps=50"});
  TrainOptions o;
  o.quiet = true;
  o.after_step = [](int64_t step) {
    if (step == 4) std::raise(SIGTERM);  // lands mid-run, like a signal during step 4
  };
  struct sigaction before {}, after {};
  sigaction(SIGTERM, nullptr, &before);
  const TrainResult r = run_training(cfg, o);
  sigaction(SIGTERM, nullptr, &after);
  CHECK(r.interrupted);
  CHECK(r.steps == 4);
  CHECK(r.checkpoint == (d.path / "run" / checkpoint_file_name(4)).string());
  const RunCheckpoint ck = load_run_checkpoint(r.checkpoint);
  CHECK(ck.state.step == 4);
  const auto lines = read_jsonl(d.path / "run" / "metrics.jsonl");
  CHECK(lines.back()["type"] == "interrupted");
  CHECK(lines.back()["step"] == 4);
  const bool restored = before.sa_handler == after.sa_handler;  // the caller's handler is back after the run
  CHECK(restored);

  // The real binary, signalled from outside while it trains.
  const fs::path out = d.path / "run2";
  const pid_t pid = spawn_alpha({"train", tiny_config(d.path), "--quiet", "--set", "out_dir=" + out.string(), "--set",
                                 "train.max_steps=1000000"});
  REQUIRE(wait_for_steps(out / "metrics.jsonl", 3));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  const RunCheckpoint ck2 = load_run_checkpoint(find_resume_checkpoint(out.string(), ""));
  CHECK(ck2.state.step == records(out / "metrics.jsonl", "step", "step").back());
  CHECK(read_jsonl(out / "metrics.jsonl").back()["type"] == "interrupted");
}

TEST_CASE("kill -9 at 20 random points during saves: a loadable latest checkpoint always survives") {
  TempDir d;
  const fs::path out = d.path / "run";
  const std::vector<std::string> base = {"train", tiny_config(d.path), "--quiet", "--set", "train.max_steps=1000000",
                                         "--set", "checkpoint.interval=1", "--set", "checkpoint.keep_last=2"};
  Rng rng(77);
  for (int i = 0; i < 20; ++i) {
    CAPTURE(i);
    std::vector<std::string> args = base;
    if (i > 0) args.push_back("--resume");
    const size_t before = records(fs::exists(out / "metrics.jsonl") ? out / "metrics.jsonl" : d.path / "none", "step", "step").size();
    const pid_t pid = spawn_alpha(args);
    REQUIRE(wait_for_steps(out / "metrics.jsonl", before + 1));  // saving every step from now on
    for (int w = 0; w < 6000 && !fs::exists(out / "latest"); ++w) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::microseconds(rng.below(20000)));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status));
    REQUIRE(fs::exists(out / "latest"));
    CHECK_NOTHROW(load_run_checkpoint(find_resume_checkpoint(out.string(), "")));
  }
  // One more clean save removes any temp file a kill left behind.
  REQUIRE(cli({"train", base[1], "--quiet", "--resume", "--set", "checkpoint.interval=1", "--set",
               "train.max_steps=" + std::to_string(load_run_checkpoint(find_resume_checkpoint(out.string(), "")).state.step + 1)}) == kExitOk);
  for (const auto& e : fs::directory_iterator(out)) CHECK_MESSAGE(e.path().extension() != ".tmp", e.path());
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().extension() == ".alph") CHECK_NOTHROW(load_run_checkpoint(e.path().string()));
}

namespace {

// The model behind tests/fixtures/export_tiny.safetensors: GPT-2 init plus noise on every tensor, so LayerNorm
// weights, biases and the Conv1D transposes all matter for the logits.
GPT tiny_export_model() {
  Rng rng(2024), noise(99);
  GPT m(GPTConfig{2, 2, 8, 8, 11, 0.0, true}, rng);
  for (const auto& [n, t0] : m.named_parameters()) {
    Tensor t = t0;
    float* p = t.mutable_data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] += static_cast<float>(0.2 * noise.normal());
  }
  return m;
}

}  // namespace

TEST_CASE("safetensors export matches the committed fixture, and PyTorch's logits from that file match ours") {
  TempDir d;
  const GPT m = tiny_export_model();
  const fs::path out = d.path / "tiny.safetensors";
  export_safetensors(out.string(), m, nullptr);
  if (const char* regen = std::getenv("ALPHA_WRITE_EXPORT_FIXTURE")) fs::copy_file(out, regen, fs::copy_options::overwrite_existing);
  const fs::path fixture = fs::path(ALPHA_FIXTURES_DIR) / "export_tiny.safetensors";
  CHECK(read_file(out) == read_file(fixture));  // the torch logits below were computed from exactly these bytes
  const auto j = nlohmann::json::parse(read_file(fs::path(ALPHA_FIXTURES_DIR) / "export_tiny_logits.json"));
  const double worst = worst_logit_error(m, j);
  CHECK(worst < 1e-5);
  // The reader parses what the writer wrote, with HF names and the Conv1D (in, out) layout.
  nlohmann::json meta;
  const NamedTensors st = read_safetensors(out.string(), &meta);
  CHECK(meta["format"] == "pt");
  const Tensor* cattn = nullptr;
  for (const auto& [n, t] : st)
    if (n == "h.1.attn.c_attn.weight") cattn = &t;
  REQUIRE(cattn != nullptr);
  CHECK(cattn->shape() == Shape{8, 24});
  const Tensor ours_w = m.parameter("transformer.h.1.attn.c_attn.weight");  // (24, 8)
  CHECK(cattn->data<float>()[1 * 24 + 5] == ours_w.data<float>()[5 * 8 + 1]);
}

TEST_CASE("alpha export + init_from round trip; bias=false writes zero biases; mismatches are refused") {
  TempDir d;
  const std::string cfg = tiny_config(d.path);
  REQUIRE(cli({"train", cfg, "--quiet", "--set", "train.max_steps=12"}) == kExitOk);
  const std::string ck_path = (d.path / "run" / checkpoint_file_name(12)).string();
  const std::string st_path = (d.path / "model.safetensors").string();
  std::string err;
  CHECK(cli({"export", ck_path, "--format", "onnx", st_path}, &err) == kExitUsage);
  CHECK(cli({"export", (d.path / "missing.alph").string(), "--format", "safetensors", st_path}, &err) == kExitCheckpoint);
  REQUIRE(cli({"export", ck_path, "--format", "safetensors", st_path}, &err) == kExitOk);
  const RunCheckpoint ck = load_run_checkpoint(ck_path);
  Rng r0(5);
  GPT fresh(ck.model, r0);
  load_safetensors_into(fresh, st_path, *tokenizer_from_json(ck.tokenizer));
  for (const auto& [n, t] : fresh.named_parameters()) CHECK_MESSAGE(same_bytes(t, ck.file.get("param/" + n)), n);

  // A run initialized from the export starts where the trained model was: lower first loss than from scratch.
  TempDir e;
  const std::string cfg_e = tiny_config(e.path);
  REQUIRE(cli({"train", cfg_e, "--quiet", "--set", "train.max_steps=1", "--set", "init_from=" + st_path}) == kExitOk);
  const double first_init = records(e.path / "run" / "metrics.jsonl", "step", "loss")[0];
  const double first_fresh = records(d.path / "run" / "metrics.jsonl", "step", "loss")[0];
  CHECK(first_init < first_fresh - 0.1);
  CHECK(read_jsonl(e.path / "run" / "metrics.jsonl")[0]["init_from"] == st_path);
  // init_from an ALPH checkpoint works too; a missing file is a checkpoint error naming init_from.
  CHECK(cli({"train", cfg_e, "--quiet", "--set", "train.max_steps=1", "--set", "init_from=" + ck_path}) == kExitOk);
  CHECK(cli({"train", cfg_e, "--quiet", "--set", "init_from=" + (d.path / "x.safetensors").string()}, &err) == kExitCheckpoint);
  CHECK(err.find("init_from") != std::string::npos);
  // Trained biases cannot go into a bias=false model; a shape mismatch names the tensor.
  CHECK(cli({"train", cfg_e, "--quiet", "--set", "model.bias=false", "--set", "init_from=" + st_path}, &err) == kExitCheckpoint);
  CHECK(err.find("model.bias = false") != std::string::npos);
  CHECK(cli({"train", cfg_e, "--quiet", "--set", "model.n_embd=32", "--set", "init_from=" + st_path}, &err) == kExitCheckpoint);
  CHECK(err.find("wte.weight") != std::string::npos);

  // bias=false: every bias tensor in the export is zero, and the file loads back into a bias=false model.
  Rng r1(3);
  GPT nb(GPTConfig{1, 2, 8, 8, 11, 0.0, false}, r1);
  export_safetensors((d.path / "nb.safetensors").string(), nb, nullptr);
  for (const auto& [n, t] : read_safetensors((d.path / "nb.safetensors").string(), nullptr))
    if (n.size() > 5 && n.substr(n.size() - 5) == ".bias")
      for (float v : t.to_f32_vector()) CHECK(v == 0.0f);
  Rng r2(4);
  GPT nb2(GPTConfig{1, 2, 8, 8, 11, 0.0, false}, r2);
  const std::unique_ptr<Tokenizer> any = train_tokenizer("char", corpus());
  load_safetensors_into(nb2, (d.path / "nb.safetensors").string(), *any);
  for (const auto& [n, t] : nb2.named_parameters()) CHECK(same_bytes(t, nb.parameter(n)));
}
