// `alpha dash`: parses the command line and serves the dashboard (train/metrics/dash.h) until Ctrl-C.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/cli.h"
#include "config/config.h"
#include "core/error.h"
#include "metrics/dash.h"

namespace alpha {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDashHelp = R"(usage: alpha dash [RUN_DIR|metrics.jsonl ...] [--port 8080] [--host 127.0.0.1]

Serves a live dashboard of one or more runs: loss and val loss, learning rate, grad norm and tokens/s
against step, overlaid per run, plus each run's config. Updates while the runs write. Works offline.
Inspection panels (docs/inspect.md): per-layer heat maps over time of gradient norm, update/weight ratio and
activation scale from the run's `inspect` records (metrics.inspect_interval), and the attention maps per head and
logit lens of RUN_DIR/inspect.json (written by `alpha inspect RUN_DIR --prompt ...`).

  RUN_DIR           a run's out_dir (reads RUN_DIR/metrics.jsonl); default: every runs/*/metrics.jsonl
  --port N          port to listen on (default 8080; 0 picks a free one)
  --host H          address to bind (default 127.0.0.1, this machine only)
)";

}  // namespace

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
