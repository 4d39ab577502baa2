#include "train/dash.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/cli.h"
#include "train/config.h"
#include "train/dash_page.h"
#include "train/metrics_read.h"

namespace alpha {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDashHelp = R"(usage: alpha dash [RUN_DIR|metrics.jsonl ...] [--port 8080] [--host 127.0.0.1]

Serves a live dashboard of one or more runs: loss and val loss, learning rate, grad norm and tokens/s
against step, overlaid per run, plus each run's config. Updates while the runs write. Works offline.

  RUN_DIR           a run's out_dir (reads RUN_DIR/metrics.jsonl); default: every runs/*/metrics.jsonl
  --port N          port to listen on (default 8080; 0 picks a free one)
  --host H          address to bind (default 127.0.0.1, this machine only)
)";

constexpr size_t kMaxRecordsPerReply = 5000;  // the page asks again for the rest

struct RunState {
  DashRun run;
  MetricsTail tail;
  std::vector<nlohmann::json> records;
  int64_t bad_lines = 0;
  bool torn = false;
  int generation = 0;
};

}  // namespace

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
    res.set_content(kDashPage, "text/html; charset=utf-8");
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

int cmd_dash(const std::vector<std::string>& args) {
  std::vector<std::string> inputs;
  std::string host = "127.0.0.1";
  int port = 8080;
  try {
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      auto value = [&](const std::string& opt) -> std::string {
        if (a.rfind(opt + "=", 0) == 0) return a.substr(opt.size() + 1);
        ALPHA_CHECK(i + 1 < args.size(), ConfigError, "[dash] {} needs a value", opt);
        return args[++i];
      };
      if (a == "--help" || a == "-h") {
        std::fputs(kDashHelp, stdout);
        return kExitOk;
      } else if (a == "--port" || a.rfind("--port=", 0) == 0) {
        const std::string v = value("--port");
        ALPHA_CHECK(!v.empty() && v.find_first_not_of("0123456789") == std::string::npos && v.size() <= 5 &&
                        std::stoi(v) <= 65535,
                    ConfigError, "[dash] --port \"{}\" is not a port number (0-65535)", v);
        port = std::stoi(v);
      } else if (a == "--host" || a.rfind("--host=", 0) == 0) {
        host = value("--host");
      } else if (!a.empty() && a[0] == '-') {
        throw ConfigError(fmt::format("[dash] unknown option \"{}\" (see alpha dash --help)", a));
      } else {
        inputs.push_back(a);
      }
    }
    std::vector<DashRun> runs = resolve_dash_inputs(inputs);
    for (const DashRun& r : runs)
      if (!fs::exists(r.path)) std::fprintf(stderr, "note: %s does not exist yet; waiting for it\n", r.path.c_str());
    DashServer server(runs);
    const int bound = server.bind(host, port);
    std::printf("alpha dash: %zu run%s at http://%s:%d/ (Ctrl-C to stop)\n", runs.size(), runs.size() == 1 ? "" : "s",
                host.c_str(), bound);
    std::fflush(stdout);
    server.serve();
    return kExitOk;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitUsage;
  }
}

}  // namespace alpha
