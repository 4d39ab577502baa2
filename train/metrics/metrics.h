// JSONL metrics: one JSON object per line, flushed per line so dashboards (and `tail -f`) see every step and
// a killed run leaves at most one torn last line. Schema: docs/metrics.md (validated by metrics_read.h).
// Sinks: the file, stdout (--json), and optionally an HTTP endpoint (train/metrics/http_sink.h).
#pragma once
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "metrics/http_sink.h"

namespace alpha {

inline constexpr int kMetricsSchemaVersion = 1;

class MetricsWriter {
 public:
  MetricsWriter() = default;
  // Opens `path` for appending (a resumed run continues the same file; a torn last line left by a killed run
  // is terminated first so new records start on a line of their own). Throws Error if it cannot.
  explicit MetricsWriter(const std::string& path, bool also_stdout = false);
  ~MetricsWriter();  // closes the HTTP sink (bounded wait), reporting drops on stderr
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Also POST every record to opts.url (no-op when the url is empty). Throws ConfigError on a bad url/token.
  void attach_http(const HttpSinkOptions& opts);

  // Writes {"type": type, "time": unix seconds, ...fields} as one line to every sink. Non-finite numbers are
  // written as null (JSON has no NaN). With an HTTP sink: drops since the last report add a `warning`
  // record (at most one per 10 s), and the `end` record gets an "http" object with the sink's counters.
  void write(const std::string& type, nlohmann::json fields);
  const std::string& path() const { return path_; }
  bool has_http() const { return http_ != nullptr; }
  HttpSinkStats http_stats() const;

 private:
  void emit(nlohmann::json line);
  std::FILE* file_ = nullptr;
  std::string path_;
  bool stdout_ = false;
  std::unique_ptr<HttpSink> http_;
  int64_t reported_drops_ = 0;
  std::chrono::steady_clock::time_point last_drop_warning_{};
};

// The per-step backend view: counters the trainer samples after each logged step (cumulative since start;
// backend_view_fields takes the difference of two samples). -1 = not available on this backend.
struct BackendCounters {
  int64_t cpu_ops = 0, gpu_ops = 0;     // alpha::dispatch_stats(): ops the dispatcher ran on each side
  int64_t queue_flushes = -1;           // Vulkan LazyQueue submissions
  int64_t dispatches = -1;              // GPU kernel dispatches
  int64_t syncs = -1;                   // host waits for the GPU
  int64_t host_reads = -1;              // GPU -> host read-backs (each waits for the GPU)
  int64_t bytes_up = -1, bytes_down = -1;  // host->GPU and GPU->host bytes
  double gpu_wait_ms = -1;              // host time blocked on the GPU
  std::map<std::string, double> gpu_ms;  // GPU time per kernel class (timestamp queries, metrics.profile)
};

BackendCounters backend_counters_now();  // cpu_ops/gpu_ops from dispatch_stats(), gpu_ms from the active backend
BackendCounters operator-(const BackendCounters& now, const BackendCounters& before);
// {"backend": {...}} for a step record (fields in docs/metrics.md); unavailable counters are omitted.
nlohmann::json backend_view_fields(const BackendCounters& delta);

}  // namespace alpha
