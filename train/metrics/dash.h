// `alpha dash`: a local web dashboard over one or more metrics.jsonl files. Serves one self-contained page
// (train/metrics/dash_page.h: HTML, CSS, JS and a canvas line chart, no CDN) plus a small JSON API it polls:
//   GET /                           the page
//   GET /api/runs                   [{"id", "name", "path"}]
//   GET /api/records?run=I&from=N   {"records": [...], "next", "total", "generation", "torn", "bad_lines"}
//   GET /api/inspect?run=I          the run's inspect.json (beside its metrics file; `alpha inspect RUN_DIR`), or 404
// Records are every parsed line of the run's file in order; `generation` changes when the file was truncated
// or rewritten (the page then starts over from 0).
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace alpha {

struct DashRun {
  std::string name;  // shown in the legend: the run directory's name
  std::string path;  // the metrics.jsonl file (may not exist yet)
};

// RUN_DIR -> RUN_DIR/metrics.jsonl, a file -> itself; no inputs -> every runs/*/metrics.jsonl. Names are
// made unique. Throws ConfigError when nothing is given and nothing is found.
std::vector<DashRun> resolve_dash_inputs(const std::vector<std::string>& inputs);

// The page GET / serves: dash_page.h with the inspection panels' script (dash_inspect_page.h) in place.
std::string dash_page_html();

class DashServer {
 public:
  explicit DashServer(std::vector<DashRun> runs);
  ~DashServer();
  DashServer(const DashServer&) = delete;
  DashServer& operator=(const DashServer&) = delete;

  int bind(const std::string& host, int port);  // port 0 = any free port; returns the port; throws Error
  void serve();                                 // blocks until stop()
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace alpha
