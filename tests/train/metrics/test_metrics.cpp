// The metrics stream: the documented schema (docs/metrics.md) is enforced on what the trainer writes, the
// validator rejects malformed records, readers survive torn lines, and the backend view is built from counters.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "metrics/metrics.h"
#include "metrics/metrics_read.h"
#include "tests/test_util.h"

using namespace alpha;
using nlohmann::json;
namespace fs = std::filesystem;
using alpha::test::TempDir;
using alpha::test::append_file;

namespace {



json valid_step() {
  return {{"type", "step"},         {"time", 1.7e9},     {"step", 3},           {"loss", 2.5},
          {"lr", 1e-3},             {"grad_norm", 0.7},  {"tokens_per_sec", 900.0}, {"step_ms", 12.5},
          {"elapsed_s", 0.1},       {"tokens_seen", 96}};
}

}  // namespace

TEST_CASE("every record a tiny training run writes is valid under the documented schema") {
  TempDir d;
  std::string corpus;
  for (int i = 0; i < 40; ++i) corpus += "a metrics schema test line " + std::to_string(i % 5) + "\n";
  std::ofstream(d.path / "data.txt") << corpus;
  std::ofstream(d.path / "cfg.json") << R"({"out_dir": ")" + (d.path / "run").string() + R"(", "device": "cpu",
    "model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 8},
    "data": {"path": ")" + (d.path / "data.txt").string() + R"("},
    "train": {"batch_size": 2, "max_steps": 4, "eval_interval": 2, "eval_iters": 1, "sample_tokens": 5},
    "checkpoint": {"interval": 100}})";
  auto cli = [](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return run_cli(static_cast<int>(argv.size()), argv.data());
  };
  REQUIRE(cli({"alpha", "train", (d.path / "cfg.json").string(), "--quiet"}) == 0);
  // Resume from the final checkpoint and train further: the file gets a resume segment.
  REQUIRE(cli({"alpha", "train", (d.path / "cfg.json").string(), "--quiet", "--set", "train.max_steps=6", "--resume"}) == 0);

  const MetricsLines m = read_metrics_file((d.path / "run" / "metrics.jsonl").string());
  CHECK(m.bad_lines == 0);
  CHECK_FALSE(m.torn_tail);
  std::map<std::string, int> types;
  for (const json& r : m.records) {
    INFO(r.dump());
    CHECK(validate_record(r) == "");
    ++types[r["type"].get<std::string>()];
  }
  CHECK(types["run"] == 1);
  CHECK(types["resume"] == 1);
  CHECK(types["step"] >= 2);
  CHECK(types["eval"] == 3);  // steps 2 and 4, then 6 after the resume
  CHECK(types["checkpoint"] >= 2);
  CHECK(types["sample"] == 2);
  CHECK(types["end"] == 2);
  CHECK(m.records.front()["type"] == "run");
  CHECK(m.records.back()["type"] == "end");
}

TEST_CASE("the validator accepts each documented record type and null for non-finite numbers") {
  json step = valid_step();
  CHECK(validate_record(step) == "");
  step["loss"] = nullptr;  // a NaN loss is written as null
  CHECK(validate_record(step) == "");
  step["backend"] = backend_view_fields(BackendCounters{})["backend"];
  CHECK(validate_record(step) == "");
  const double t = 1.7e9;
  CHECK(validate_record({{"type", "run"}, {"time", t}, {"schema", kMetricsSchemaVersion}, {"config", json::object()},
                         {"device", "cpu"}, {"version", "0.1.0"}}) == "");
  CHECK(validate_record({{"type", "eval"}, {"time", t}, {"step", 2}, {"train_loss", 2.0}, {"val_loss", 2.1}}) == "");
  CHECK(validate_record({{"type", "checkpoint"}, {"time", t}, {"step", 2}, {"path", "ckpt.bin"}, {"bytes", 10}}) == "");
  CHECK(validate_record({{"type", "sample"}, {"time", t}, {"step", 2}, {"text", "hi"}}) == "");
  CHECK(validate_record({{"type", "resume"}, {"time", t}, {"schema", kMetricsSchemaVersion}, {"config", json::object()},
                         {"device", "cpu"}, {"version", "0.1.0"}, {"step", 2}, {"checkpoint", "ckpt.bin"}}) == "");
  CHECK(validate_record({{"type", "interrupted"}, {"time", t}, {"step", 2}, {"signal", 2}, {"checkpoint", "c"}}) == "");
  CHECK(validate_record({{"type", "warning"}, {"time", t}, {"message", "slow"}, {"source", "metrics.http"}}) == "");
  CHECK(validate_record({{"type", "error"}, {"time", t}, {"message", "boom"}, {"step", 3}}) == "");
  CHECK(validate_record({{"type", "end"}, {"time", t}, {"step", 4}, {"elapsed_s", 1.5}}) == "");
}

TEST_CASE("the validator names what is wrong with a malformed record") {
  json s = valid_step();
  s.erase("lr");
  CHECK(validate_record(s).find("missing \"lr\"") != std::string::npos);
  s = valid_step();
  s["loss"] = "2.5";
  CHECK(validate_record(s).find("\"loss\" must be a number") != std::string::npos);
  s = valid_step();
  s["step"] = 2.5;
  CHECK(validate_record(s).find("\"step\" must be an integer") != std::string::npos);
  s = valid_step();
  s["step"] = -1;
  CHECK(validate_record(s).find(">= 0") != std::string::npos);
  s = valid_step();
  s.erase("time");
  CHECK(validate_record(s).find("\"time\"") != std::string::npos);
  s = valid_step();
  s["backend"] = {{"cpu_ops", 1}};
  CHECK(validate_record(s).find("gpu_ops") != std::string::npos);
  CHECK(validate_record({{"type", "bogus"}, {"time", 1.0}}).find("unknown record type \"bogus\"") != std::string::npos);
  CHECK(validate_record(json::array()).find("JSON object") != std::string::npos);
  CHECK(validate_record({{"type", "run"}, {"time", 1.0}, {"schema", kMetricsSchemaVersion + 1}, {"config", json::object()},
                         {"device", "cpu"}, {"version", "x"}})
            .find("schema") != std::string::npos);
}

TEST_CASE("the tail reader holds back a torn last line until its newline and skips garbage lines") {
  TempDir d;
  const fs::path p = d.path / "metrics.jsonl";
  MetricsTail tail(p.string());
  CHECK(tail.poll().records.empty());  // no file yet
  append_file(p, R"({"type":"step","step":1})" "\n" R"({"type":"step","st)");
  MetricsLines a = tail.poll();
  REQUIRE(a.records.size() == 1);
  CHECK(a.records[0]["step"] == 1);
  CHECK(a.torn_tail);
  CHECK(a.bad_lines == 0);
  append_file(p, R"(ep":2})" "\n" "not json\n" R"({"type":"eval","step":2})" "\n");
  MetricsLines b = tail.poll();
  REQUIRE(b.records.size() == 2);
  CHECK(b.records[0]["step"] == 2);
  CHECK(b.records[1]["type"] == "eval");
  CHECK(b.bad_lines == 1);
  CHECK_FALSE(b.torn_tail);
  CHECK(tail.poll().records.empty());
  fs::resize_file(p, 0);  // rewritten: start over
  append_file(p, R"({"type":"run"})" "\n");
  MetricsLines c = tail.poll();
  CHECK(c.truncated);
  REQUIRE(c.records.size() == 1);
  CHECK(c.records[0]["type"] == "run");
}

TEST_CASE("a killed run's torn line neither breaks reading nor the records a resumed writer appends") {
  TempDir d;
  const fs::path p = d.path / "metrics.jsonl";
  {
    MetricsWriter w(p.string());
    w.write("step", valid_step());
  }
  append_file(p, R"({"type":"step","time":1.7e9,"step":4,"lo)");  // killed mid-line
  MetricsLines killed = read_metrics_file(p.string());
  CHECK(killed.records.size() == 1);
  CHECK(killed.torn_tail);
  {
    MetricsWriter resumed(p.string());
    resumed.write("resume", {{"schema", kMetricsSchemaVersion}, {"config", json::object()}, {"device", "cpu"},
                             {"version", "0.1.0"}, {"step", 3}, {"checkpoint", "ckpt"}});
  }
  const MetricsLines m = read_metrics_file(p.string());
  CHECK_FALSE(m.torn_tail);
  CHECK(m.bad_lines == 1);  // the torn fragment, now on a line of its own
  REQUIRE(m.records.size() == 2);
  CHECK(m.records[1]["type"] == "resume");
  CHECK(validate_record(m.records[1]) == "");
  // A torn tail that is a whole object missing only its newline is still read from a finished file.
  append_file(p, valid_step().dump());
  const MetricsLines tail = read_metrics_file(p.string());
  CHECK(tail.torn_tail);
  CHECK(tail.records.size() == 3);
}

TEST_CASE("the writer scrubs non-finite numbers to null and stamps every record with its time") {
  TempDir d;
  const fs::path p = d.path / "m.jsonl";
  {
    MetricsWriter w(p.string());
    json s = valid_step();
    s["loss"] = std::nan("");
    s["grad_norm"] = INFINITY;
    w.write("step", s);
  }
  const std::string text = alpha::test::read_file(p);
  CHECK(text.back() == '\n');
  const json r = json::parse(text);
  CHECK(r["loss"].is_null());
  CHECK(r["grad_norm"].is_null());
  CHECK(r["time"].get<double>() > 1.5e9);  // unix seconds, after 2017
  CHECK(validate_record(r) == "");
}

TEST_CASE("the backend view is the difference of two counter samples; unavailable counters are omitted") {
  BackendCounters before = backend_counters_now(), after = before;
  after.cpu_ops += 30;
  after.gpu_ops += 10;
  json cpu_only = backend_view_fields(after - before)["backend"];
  CHECK(cpu_only["cpu_ops"] == 30);
  CHECK(cpu_only["gpu_ops"] == 10);
  CHECK(cpu_only["gpu_op_fraction"].get<double>() == doctest::Approx(0.25));
  CHECK_FALSE(cpu_only.contains("queue_flushes"));
  CHECK_FALSE(cpu_only.contains("gpu_ms"));

  BackendCounters g0, g1;
  g0.queue_flushes = 5, g1.queue_flushes = 9;
  g0.bytes_up = 100, g1.bytes_up = 612;
  g0.bytes_down = 0, g1.bytes_down = 64;
  g0.gpu_wait_ms = 1.0, g1.gpu_wait_ms = 3.5;
  g0.gpu_ms = {{"matmul", 10.0}}, g1.gpu_ms = {{"matmul", 14.0}, {"softmax", 1.5}};
  json gpu = backend_view_fields(g1 - g0)["backend"];
  CHECK(gpu["queue_flushes"] == 4);
  CHECK(gpu["bytes_up"] == 512);
  CHECK(gpu["bytes_down"] == 64);
  CHECK(gpu["gpu_wait_ms"].get<double>() == doctest::Approx(2.5));
  CHECK(gpu["gpu_ms"]["matmul"].get<double>() == doctest::Approx(4.0));
  CHECK(gpu["gpu_ms"]["softmax"].get<double>() == doctest::Approx(1.5));
  CHECK(gpu["gpu_op_fraction"].get<double>() == 0.0);  // no ops at all
  json step = valid_step();
  step.update(backend_view_fields(g1 - g0));
  CHECK(validate_record(step) == "");
}
