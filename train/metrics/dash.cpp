#include "metrics/dash.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "config/config.h"
#include "metrics/dash_inspect_page.h"
#include "metrics/dash_page.h"
#include "metrics/metrics_read.h"

namespace alpha {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxRecordsPerReply = 5000;  // the page asks again for the rest
constexpr size_t kMaxInspectBytes = size_t{64} << 20;  // an inspect.json larger than this is not served

struct RunState {
  DashRun run;
  MetricsTail tail;
  std::vector<nlohmann::json> records;
  int64_t bad_lines = 0;
  bool torn = false;
  int generation = 0;
};

}  // namespace

std::string dash_page_html() {
  static const std::string page = [] {
    std::string p = kDashPage;
    const std::string marker = "/*ALPHA_INSPECT_SCRIPT*/";
    p.replace(p.find(marker), marker.size(), kDashInspectScript);
    return p;
  }();
  return page;
}

std::vector<DashRun> resolve_dash_inputs(const std::vector<std::string>& inputs) {
  std::vector<DashRun> runs;
  if (inputs.empty()) {
    if (fs::is_directory("runs"))
      for (const auto& e : fs::directory_iterator("runs"))
        if (fs::exists(e.path() / "metrics.jsonl")) runs.push_back({e.path().filename().string(), (e.path() / "metrics.jsonl").string()});
    std::sort(runs.begin(), runs.end(), [](const DashRun& a, const DashRun& b) { return a.name < b.name; });
    ALPHA_CHECK(!runs.empty(), ConfigError, "[dash] no runs given and no runs/*/metrics.jsonl here (see alpha dash --help)");
  }
  for (const std::string& in : inputs) {
    const fs::path p(in);
    const bool is_file = fs::is_regular_file(p) || (!fs::exists(p) && p.extension() == ".jsonl");
    const fs::path file = is_file ? p : p / "metrics.jsonl";
    fs::path dir = fs::absolute(file).lexically_normal().parent_path();
    std::string name = is_file && file.filename() != "metrics.jsonl" ? file.stem().string() : dir.filename().string();
    if (name.empty()) name = "run";
    runs.push_back({name, file.string()});
  }
  std::set<std::string> seen;
  for (DashRun& r : runs) {
    std::string n = r.name;
    for (int i = 2; seen.count(n); ++i) n = fmt::format("{} ({})", r.name, i);
    r.name = n;
    seen.insert(n);
  }
  return runs;
}

struct DashServer::Impl {
  std::vector<RunState> runs;
  std::mutex mu;
  httplib::Server server;

  nlohmann::json records(size_t id, size_t from) {
    std::lock_guard<std::mutex> lk(mu);
    RunState& r = runs[id];
    MetricsLines got = r.tail.poll();
    if (got.truncated) {
      r.records.clear();
      r.bad_lines = 0;
      ++r.generation;
    }
    for (auto& rec : got.records) r.records.push_back(std::move(rec));
    r.bad_lines += got.bad_lines;
    r.torn = got.torn_tail;
    from = std::min(from, r.records.size());
    const size_t to = std::min(r.records.size(), from + kMaxRecordsPerReply);
    nlohmann::json out = {{"records", nlohmann::json::array()}, {"next", to},          {"total", r.records.size()},
                          {"generation", r.generation},         {"torn", r.torn},     {"bad_lines", r.bad_lines},
                          {"exists", fs::exists(r.run.path)}};
    for (size_t i = from; i < to; ++i) out["records"].push_back(r.records[i]);
    return out;
  }
};

DashServer::DashServer(std::vector<DashRun> runs) : impl_(std::make_unique<Impl>()) {
  for (DashRun& r : runs) impl_->runs.push_back(RunState{r, MetricsTail(r.path), {}, 0, false, 0});
  Impl* s = impl_.get();
  auto no_cache = [](httplib::Response& res) { res.set_header("Cache-Control", "no-store"); };
  s->server.Get("/", [no_cache](const httplib::Request&, httplib::Response& res) {
    no_cache(res);
    res.set_content(dash_page_html(), "text/html; charset=utf-8");
  });
  // RUN_DIR/inspect.json (`alpha inspect RUN_DIR --prompt ...`) beside the run's metrics file; 404 when absent.
  s->server.Get("/api/inspect", [s, no_cache](const httplib::Request& req, httplib::Response& res) {
    size_t id = s->runs.size();
    try {
      id = std::stoul(req.get_param_value("run"));
    } catch (const std::exception&) {
    }
    const fs::path file = id < s->runs.size() ? fs::path(s->runs[id].run.path).parent_path() / "inspect.json" : fs::path();
    std::error_code ec;
    const auto size = file.empty() ? 0 : fs::file_size(file, ec);
    std::string text;
    if (!file.empty() && !ec && size <= kMaxInspectBytes) {
      std::ifstream in(file, std::ios::binary);
      text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    no_cache(res);
    if (text.empty() || !nlohmann::json::accept(text)) {
      res.status = 404;
      res.set_content(R"J({"error": "no readable inspect.json for this run (alpha inspect RUN_DIR --prompt ...)"})J",
                      "application/json");
      return;
    }
    res.set_content(text, "application/json");
  });
  s->server.Get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
  s->server.Get("/api/runs", [s, no_cache](const httplib::Request&, httplib::Response& res) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < s->runs.size(); ++i)
      out.push_back({{"id", i}, {"name", s->runs[i].run.name}, {"path", s->runs[i].run.path}});
    no_cache(res);
    res.set_content(out.dump(), "application/json");
  });
  s->server.Get("/api/records", [s, no_cache](const httplib::Request& req, httplib::Response& res) {
    size_t id = 0, from = 0;
    try {
      id = std::stoul(req.get_param_value("run"));
      if (req.has_param("from")) from = std::stoul(req.get_param_value("from"));
    } catch (const std::exception&) {
      id = s->runs.size();
    }
    if (id >= s->runs.size()) {
      res.status = 404;
      res.set_content(R"({"error": "no such run"})", "application/json");
      return;
    }
    no_cache(res);
    res.set_content(s->records(id, from).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                    "application/json");
  });
}

DashServer::~DashServer() { stop(); }

int DashServer::bind(const std::string& host, int port) {
  const int got = port == 0 ? impl_->server.bind_to_any_port(host) : (impl_->server.bind_to_port(host, port) ? port : -1);
  ALPHA_CHECK(got > 0, Error, "[dash] cannot listen on {}:{} (in use? try --port)", host, port);
  return got;
}

void DashServer::serve() { impl_->server.listen_after_bind(); }
void DashServer::stop() { impl_->server.stop(); }

}  // namespace alpha
