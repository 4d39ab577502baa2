// `alpha dash` server side: inputs resolve to files and names, the page is self-contained, and the JSON API
// serves a run's records incrementally (torn tail held back, truncation restarts). The page itself is
// tested in headless Chromium by tests/dash/dash_test.mjs.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "metrics/dash.h"
#include "metrics/dash_page.h"
#include "tests/test_util.h"

using namespace alpha;
using nlohmann::json;
namespace fs = std::filesystem;
using alpha::test::TempDir;
using alpha::test::append_file;

namespace {



struct RunningDash {
  DashServer server;
  std::thread thread;
  int port;
  explicit RunningDash(std::vector<DashRun> runs) : server(std::move(runs)) {
    port = server.bind("127.0.0.1", 0);
    thread = std::thread([this] { server.serve(); });
  }
  ~RunningDash() {
    server.stop();
    thread.join();
  }
  json get(const std::string& path) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(5, 0);
    for (int i = 0; i < 100; ++i) {  // the listener may take a moment to start
      if (auto r = c.Get(path); r && r->status == 200) return json::parse(r->body);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL("GET " << path << " failed");
    return {};
  }
};

}  // namespace

TEST_CASE("dash inputs: a run directory, a metrics file, unique names") {
  TempDir d;
  fs::create_directories(d.path / "a");
  fs::create_directories(d.path / "x" / "a");
  append_file(d.path / "b.jsonl", "");
  const auto runs = resolve_dash_inputs({(d.path / "a").string(), (d.path / "x" / "a").string(), (d.path / "b.jsonl").string()});
  REQUIRE(runs.size() == 3);
  CHECK(runs[0].path == (d.path / "a" / "metrics.jsonl").string());
  CHECK(runs[0].name == "a");
  CHECK(runs[1].name == "a (2)");
  CHECK(runs[2].path == (d.path / "b.jsonl").string());
  CHECK(runs[2].name == "b");
}

TEST_CASE("the dashboard page is self-contained: no external scripts, styles or fonts") {
  const std::string page = dash_page_html();
  CHECK(page.find("function drawInspect") != std::string::npos);  // the inspection panels' script is inlined
  CHECK(page.find("ALPHA_INSPECT_SCRIPT") == std::string::npos);
  CHECK(page.find("<canvas") != std::string::npos);
  CHECK(page.find("://") == std::string::npos);  // no absolute URL of any kind (CDN, fonts)
  CHECK(page.find("src=") == std::string::npos);
}

TEST_CASE("the dash API serves records incrementally, holds back a torn tail and restarts on truncation") {
  TempDir d;
  const fs::path file = d.path / "r1" / "metrics.jsonl";
  fs::create_directories(file.parent_path());
  append_file(file, R"({"type":"run","config":{"seed":1}})" "\n" R"({"type":"step","step":1,"loss":2})" "\n"
               R"({"type":"step","step":2,"lo)");
  RunningDash dash(resolve_dash_inputs({(d.path / "r1").string()}));
  const json runs = dash.get("/api/runs");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0]["name"] == "r1");

  json a = dash.get("/api/records?run=0&from=0");
  CHECK(a["records"].size() == 2);
  CHECK(a["next"] == 2);
  CHECK(a["torn"] == true);
  CHECK(a["records"][0]["config"]["seed"] == 1);
  append_file(file, R"(ss":1.5})" "\n");
  json b = dash.get("/api/records?run=0&from=2");
  REQUIRE(b["records"].size() == 1);
  CHECK(b["records"][0]["loss"] == 1.5);
  CHECK(b["torn"] == false);
  CHECK(b["next"] == 3);
  CHECK(b["generation"] == a["generation"]);

  fs::resize_file(file, 0);
  append_file(file, R"({"type":"run","config":{"seed":2}})" "\n");
  json c = dash.get("/api/records?run=0&from=3");
  CHECK(c["generation"] != a["generation"]);
  CHECK(c["total"] == 1);
  json c0 = dash.get("/api/records?run=0&from=0");
  CHECK(c0["records"][0]["config"]["seed"] == 2);

  httplib::Client cl("127.0.0.1", dash.port);
  auto missing = cl.Get("/api/records?run=7&from=0");
  REQUIRE(missing);
  CHECK(missing->status == 404);
  auto page = cl.Get("/");
  REQUIRE(page);
  CHECK(page->body == dash_page_html());
}

TEST_CASE("the dash serves a run's inspect.json (alpha inspect RUN_DIR), 404 when absent or not JSON") {
  TempDir d;
  for (const char* r : {"a", "b"}) {
    fs::create_directories(d.path / r);
    append_file(d.path / r / "metrics.jsonl", R"({"type":"run","config":{"seed":1}})" "\n");
  }
  append_file(d.path / "a" / "inspect.json", R"({"tokens": [1, 2], "logit_lens": []})");
  RunningDash dash(resolve_dash_inputs({(d.path / "a").string(), (d.path / "b").string()}));
  const json a = dash.get("/api/inspect?run=0");
  CHECK(a["tokens"] == json::array({1, 2}));
  httplib::Client cl("127.0.0.1", dash.port);
  for (const char* q : {"/api/inspect?run=1", "/api/inspect?run=2", "/api/inspect?run=x", "/api/inspect"}) {
    CAPTURE(q);
    auto r = cl.Get(q);
    REQUIRE(r);
    CHECK(r->status == 404);
  }
  append_file(d.path / "a" / "inspect.json", "{");  // now not JSON (a torn write by hand)
  auto torn = cl.Get("/api/inspect?run=0");
  REQUIRE(torn);
  CHECK(torn->status == 404);
}

TEST_CASE("alpha dash refuses bad options with exit code 2") {
  CHECK(cmd_dash({"--port", "99999"}) == 2);
  CHECK(cmd_dash({"--bogus"}) == 2);
  CHECK(cmd_dash({"--port"}) == 2);
}
