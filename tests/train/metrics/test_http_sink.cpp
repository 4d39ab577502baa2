// The HTTP metrics sink against a cpp-httplib server on 127.0.0.1: batches arrive in order with the bearer
// token; a down, slow or failing endpoint never blocks the caller, retries back off, and drops are counted.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "metrics/http_sink.h"
#include "metrics/metrics.h"
#include "metrics/metrics_read.h"

using namespace alpha;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A loopback server running `handler` for POST /ingest on a free port, on its own thread.
struct TestServer {
  httplib::Server srv;
  std::thread thread;
  int port = 0;
  explicit TestServer(httplib::Server::Handler handler) {
    srv.Post("/ingest", std::move(handler));
    port = srv.bind_to_any_port("127.0.0.1");
    REQUIRE(port > 0);
    thread = std::thread([this] { srv.listen_after_bind(); });
    for (int i = 0; i < 200 && !srv.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(srv.is_running());
  }
  ~TestServer() {
    srv.stop();
    thread.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/ingest"; }
};

// A loopback port nothing listens on (connections are refused): bound without listen(), then closed.
int dead_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

template <class Pred>
bool wait_for(Pred pred, double seconds) {
  const auto t0 = Clock::now();
  while (!pred()) {
    if (since(t0) > seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::string line(int i) { return "{\"type\":\"step\",\"step\":" + std::to_string(i) + "}"; }

}  // namespace

TEST_CASE("batches of lines arrive in order, as NDJSON, with the bearer token from the named variable") {
  std::mutex mu;
  std::vector<std::string> got;
  int posts = 0;
  bool headers_ok = true;
  TestServer server([&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lk(mu);
    ++posts;
    headers_ok = headers_ok && req.get_header_value("Authorization") == "Bearer s3cret" &&
                 req.get_header_value("Content-Type") == "application/x-ndjson";
    std::istringstream in(req.body);
    for (std::string l; std::getline(in, l);) got.push_back(l);
    res.status = 204;
  });
  ::setenv("ALPHA_TEST_METRICS_TOKEN", "s3cret", 1);
  HttpSinkOptions o;
  o.url = server.url();
  o.token_env = "ALPHA_TEST_METRICS_TOKEN";
  o.batch_lines = 50;
  o.linger_s = 0.01;
  HttpSink sink(o);
  for (int i = 0; i < 120; ++i) sink.push(line(i));
  sink.close();
  const HttpSinkStats s = sink.stats();
  CHECK(s.pushed == 120);
  CHECK(s.sent == 120);
  CHECK(s.dropped == 0);
  CHECK(s.queued == 0);
  std::lock_guard<std::mutex> lk(mu);
  CHECK(headers_ok);
  CHECK(posts >= 3);  // at most 50 lines per POST
  REQUIRE(got.size() == 120);
  for (int i = 0; i < 120; ++i) CHECK(got[static_cast<size_t>(i)] == line(i));
}

TEST_CASE("an endpoint that is down: pushes never block, close is bounded, every line is counted as dropped") {
  HttpSinkOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(dead_port()) + "/ingest";
  o.queue_lines = 16;
  o.timeout_s = 0.2;
  o.backoff_s = 0.01;
  o.max_retries = 2;
  o.linger_s = 0;
  o.close_timeout_s = 0.3;
  HttpSink sink(o);
  double slowest = 0;
  const auto t0 = Clock::now();
  for (int i = 0; i < 500; ++i) {
    const auto tp = Clock::now();
    sink.push(line(i));
    slowest = std::max(slowest, since(tp));
  }
  CHECK(since(t0) < 1.0);
  CHECK(slowest < 0.05);
  CHECK(wait_for([&] { return sink.stats().failed_posts >= 1; }, 5.0));
  const auto tc = Clock::now();
  sink.close();
  CHECK(since(tc) < 2.0);
  const HttpSinkStats s = sink.stats();
  CHECK(s.sent == 0);
  CHECK(s.dropped == 500);
  CHECK(s.queued == 0);
  CHECK(s.last_error == "Connection");  // refused: nothing listens
}

TEST_CASE("a slow endpoint: pushes never wait for it, overflow is dropped oldest-first and counted") {
  std::atomic<int> requests{0};
  TestServer server([&](const httplib::Request&, httplib::Response& res) {
    ++requests;
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    res.status = 200;
  });
  HttpSinkOptions o;
  o.url = server.url();
  o.queue_lines = 32;
  o.batch_lines = 8;
  o.linger_s = 0;
  o.timeout_s = 2;
  o.close_timeout_s = 0.5;
  HttpSink sink(o);
  sink.push(line(0));
  REQUIRE(wait_for([&] { return requests.load() >= 1; }, 3.0));  // the server is now busy sleeping
  double slowest = 0;
  for (int i = 1; i < 300; ++i) {
    const auto tp = Clock::now();
    sink.push(line(i));
    slowest = std::max(slowest, since(tp));
  }
  CHECK(slowest < 0.05);
  CHECK(sink.stats().dropped >= 300 - 1 - 32 - 8);  // what did not fit the queue (one batch may be in flight)
  CHECK(wait_for([&] { return sink.stats().sent >= 1; }, 3.0));
  const auto tc = Clock::now();
  sink.close();
  CHECK(since(tc) < o.close_timeout_s + o.timeout_s + 1.0);
  const HttpSinkStats s = sink.stats();
  CHECK(s.sent + s.dropped == 300);
  CHECK(s.queued == 0);
}

TEST_CASE("a failing endpoint (HTTP 500): retried with doubling backoff, then dropped") {
  std::mutex mu;
  std::vector<Clock::time_point> attempts;
  TestServer server([&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lk(mu);
    attempts.push_back(Clock::now());
    res.status = 500;
  });
  HttpSinkOptions o;
  o.url = server.url();
  o.linger_s = 0;
  o.max_retries = 3;
  o.backoff_s = 0.05;
  o.timeout_s = 1;
  HttpSink sink(o);
  sink.push(line(1));
  REQUIRE(wait_for([&] { return sink.stats().dropped == 1; }, 5.0));
  const HttpSinkStats s = sink.stats();
  CHECK(s.posts == 4);
  CHECK(s.failed_posts == 4);
  CHECK(s.sent == 0);
  CHECK(s.last_error == "HTTP 500");
  std::lock_guard<std::mutex> lk(mu);
  REQUIRE(attempts.size() == 4);
  for (size_t k = 1; k < attempts.size(); ++k) {
    const double gap = std::chrono::duration<double>(attempts[k] - attempts[k - 1]).count();
    CHECK(gap >= 0.9 * o.backoff_s * static_cast<double>(1 << (k - 1)));
  }
}

TEST_CASE("a rejected batch (HTTP 401) is dropped at once, not retried") {
  std::atomic<int> requests{0};
  TestServer server([&](const httplib::Request&, httplib::Response& res) {
    ++requests;
    res.status = 401;
  });
  HttpSinkOptions o;
  o.url = server.url();
  o.linger_s = 0;
  o.backoff_s = 0.01;
  HttpSink sink(o);
  sink.push(line(1));
  REQUIRE(wait_for([&] { return sink.stats().dropped == 1; }, 5.0));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a retry would arrive within this
  CHECK(requests.load() == 1);
  CHECK(sink.stats().last_error == "HTTP 401");
}

TEST_CASE("bad sink settings are config errors: malformed url, unset token variable") {
  HttpSinkOptions o;
  o.url = "127.0.0.1:9/x";
  CHECK_THROWS_AS(HttpSink{o}, ConfigError);
  o.url = "http:///x";
  CHECK_THROWS_AS(HttpSink{o}, ConfigError);
  o.url = "http://127.0.0.1:9/x";
  o.token_env = "ALPHA_TEST_SURELY_UNSET_VARIABLE";
  ::unsetenv(o.token_env.c_str());
  CHECK_THROWS_WITH_AS(HttpSink{o}, doctest::Contains("ALPHA_TEST_SURELY_UNSET_VARIABLE"), ConfigError);
  CHECK(split_http_url("https://example.org") == std::pair<std::string, std::string>{"https://example.org", "/"});
  CHECK(split_http_url("http://h:8/a/b?c") == std::pair<std::string, std::string>{"http://h:8", "/a/b?c"});
}

TEST_CASE("the metrics writer reports HTTP drops in the file: a warning record and the end record's counters") {
  const auto dir = std::filesystem::temp_directory_path() / ("alpha_http_writer_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "metrics.jsonl").string();
  std::filesystem::remove(path);
  const auto t0 = Clock::now();
  {
    MetricsWriter w(path);
    HttpSinkOptions o;
    o.url = "http://127.0.0.1:" + std::to_string(dead_port()) + "/ingest";
    o.queue_lines = 4;
    o.timeout_s = 0.2;
    o.close_timeout_s = 0.2;
    w.attach_http(o);
    REQUIRE(w.has_http());
    for (int i = 1; i <= 20; ++i)
      w.write("step", {{"step", i}, {"loss", 1.0}, {"lr", 1e-3}, {"grad_norm", 1.0}, {"tokens_per_sec", 1.0},
                       {"step_ms", 1.0}, {"elapsed_s", 1.0}, {"tokens_seen", i}});
    w.write("end", {{"step", 20}, {"elapsed_s", 1.0}});
  }
  CHECK(since(t0) < 3.0);
  const MetricsLines m = read_metrics_file(path);
  int warnings = 0;
  for (const auto& r : m.records) {
    INFO(r.dump());
    CHECK(validate_record(r) == "");
    if (r["type"] == "warning") {
      ++warnings;
      CHECK(r["source"] == "metrics.http");
      CHECK(r["http"]["dropped"].get<int64_t>() > 0);
    }
  }
  CHECK(warnings == 1);  // at most one per 10 s
  REQUIRE(m.records.back()["type"] == "end");
  CHECK(m.records.back()["http"]["dropped"].get<int64_t>() >= 21 - 2 * 4);  // all but the queue and one batch
  std::filesystem::remove_all(dir);
}
