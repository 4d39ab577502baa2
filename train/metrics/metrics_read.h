// Reading the metrics stream: the schema validator (docs/metrics.md, enforced by tests) and a tail reader
// that tolerates a torn last line (a killed writer) and lines that are not JSON (a torn line a resume ended).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace alpha {

// "" when `record` is a valid record of schema version kMetricsSchemaVersion, else what is wrong, e.g.
// "[metrics] step record: \"loss\" must be a number or null (got string)". Extra fields are allowed.
std::string validate_record(const nlohmann::json& record);

struct MetricsLines {
  std::vector<nlohmann::json> records;  // complete lines that parsed as JSON objects, in file order
  int64_t bad_lines = 0;                // complete lines that did not parse (skipped)
  bool torn_tail = false;               // the file ends in a line without '\n' (held back, not in records)
  bool truncated = false;               // the file shrank since the last poll: reading restarted at 0
};

// Incremental reader for a file another process appends to (`alpha dash`, tests).
class MetricsTail {
 public:
  explicit MetricsTail(std::string path) : path_(std::move(path)) {}
  // What was appended since the last call. A last line without '\n' is held back until its newline arrives
  // (the writer may be mid-line); a file that does not exist (yet) yields nothing.
  MetricsLines poll();
  const std::string& path() const { return path_; }
  const std::string& pending() const { return pending_; }  // the held-back unfinished last line

 private:
  std::string path_;
  int64_t offset_ = 0;
  std::string pending_;  // bytes of an unfinished last line
};

// The whole file at once (a finished or killed run). A torn last line is flagged, and kept only if it
// parses as a complete JSON object. Throws Error if the file cannot be opened.
MetricsLines read_metrics_file(const std::string& path);

}  // namespace alpha
