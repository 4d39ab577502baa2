#include "metrics/metrics.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/backend.h"
#include "core/error.h"

namespace alpha {

MetricsWriter::MetricsWriter(const std::string& path, bool also_stdout) : path_(path), stdout_(also_stdout) {
  file_ = std::fopen(path.c_str(), "a+");
  ALPHA_CHECK(file_ != nullptr, Error, "[metrics] cannot open \"{}\" for appending: {}", path, std::strerror(errno));
  // A killed writer may have left a torn line: end it so the next record is parseable on its own.
  const bool torn = std::fseek(file_, -1, SEEK_END) == 0 && std::fgetc(file_) != '\n';
  std::fseek(file_, 0, SEEK_END);  // C streams need a seek between a read and a write
  if (torn) std::fputc('\n', file_);
  std::fflush(file_);
}

MetricsWriter::~MetricsWriter() {
  if (http_) {
    http_->close();
    const HttpSinkStats s = http_->stats();
    if (s.dropped > 0)
      std::fprintf(stderr, "metrics: the HTTP sink dropped %lld of %lld records (last error: %s)\n",
                   static_cast<long long>(s.dropped), static_cast<long long>(s.pushed), s.last_error.c_str());
  }
  if (file_) std::fclose(file_);
}

void MetricsWriter::attach_http(const HttpSinkOptions& opts) {
  if (opts.url.empty()) return;
  http_ = std::make_unique<HttpSink>(opts);
}

HttpSinkStats MetricsWriter::http_stats() const { return http_ ? http_->stats() : HttpSinkStats{}; }

static void scrub(nlohmann::json& j) {
  if (j.is_number_float() && !std::isfinite(j.get<double>())) j = nullptr;
  else if (j.is_object() || j.is_array())
    for (auto& v : j) scrub(v);
}

static double unix_seconds() {
  using namespace std::chrono;
  return static_cast<double>(duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count()) / 1e3;
}

static nlohmann::json http_stats_json(const HttpSinkStats& s) {
  return {{"sent", s.sent}, {"dropped", s.dropped}, {"queued", s.queued}, {"failed_posts", s.failed_posts}};
}

void MetricsWriter::emit(nlohmann::json line) {
  scrub(line);
  std::string s = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  s += '\n';
  if (file_) {
    std::fwrite(s.data(), 1, s.size(), file_);
    std::fflush(file_);
  }
  if (stdout_) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  }
  if (http_) {
    s.pop_back();
    http_->push(std::move(s));
  }
}

void MetricsWriter::write(const std::string& type, nlohmann::json fields) {
  nlohmann::json line = {{"type", type}, {"time", unix_seconds()}};
  line.update(fields);
  if (http_ && type == "end") line["http"] = http_stats_json(http_->stats());
  emit(std::move(line));
  if (!http_) return;
  const HttpSinkStats s = http_->stats();
  const auto now = std::chrono::steady_clock::now();
  if (s.dropped > reported_drops_ && now - last_drop_warning_ >= std::chrono::seconds(10)) {
    emit({{"type", "warning"}, {"time", unix_seconds()}, {"source", "metrics.http"},
          {"message", fmt::format("the HTTP sink dropped {} records so far (last error: {})", s.dropped,
                                  s.last_error.empty() ? "queue full" : s.last_error)},
          {"http", http_stats_json(s)}});
    reported_drops_ = s.dropped;
    last_drop_warning_ = now;
  }
}

BackendCounters backend_counters_now() {
  BackendCounters c;
  c.cpu_ops = dispatch_stats().cpu_ops;
  c.gpu_ops = dispatch_stats().gpu_ops;
  if (const Backend* be = active_backend()) {
    for (const auto& [name, ns] : be->kernel_gpu_ns()) c.gpu_ms[name] = ns / 1e6;
    const QueueCounters q = be->queue_counters();
    c.queue_flushes = q.submissions;
    c.dispatches = q.dispatches;
    c.syncs = q.syncs;
    c.host_reads = q.host_reads;
    c.bytes_up = q.bytes_up;
    c.bytes_down = q.bytes_down;
    c.gpu_wait_ms = static_cast<double>(q.wait_ns) / 1e6;
  }
  return c;
}

BackendCounters operator-(const BackendCounters& a, const BackendCounters& b) {
  auto sub = [](int64_t x, int64_t y) { return x < 0 || y < 0 ? int64_t{-1} : x - y; };
  BackendCounters d;
  d.cpu_ops = a.cpu_ops - b.cpu_ops;
  d.gpu_ops = a.gpu_ops - b.gpu_ops;
  d.queue_flushes = sub(a.queue_flushes, b.queue_flushes);
  d.dispatches = sub(a.dispatches, b.dispatches);
  d.syncs = sub(a.syncs, b.syncs);
  d.host_reads = sub(a.host_reads, b.host_reads);
  d.bytes_up = sub(a.bytes_up, b.bytes_up);
  d.bytes_down = sub(a.bytes_down, b.bytes_down);
  d.gpu_wait_ms = a.gpu_wait_ms < 0 || b.gpu_wait_ms < 0 ? -1 : a.gpu_wait_ms - b.gpu_wait_ms;
  for (const auto& [k, v] : a.gpu_ms) {
    auto it = b.gpu_ms.find(k);
    d.gpu_ms[k] = v - (it == b.gpu_ms.end() ? 0.0 : it->second);
  }
  return d;
}

nlohmann::json backend_view_fields(const BackendCounters& d) {
  nlohmann::json b = {{"cpu_ops", d.cpu_ops}, {"gpu_ops", d.gpu_ops}};
  const int64_t ops = d.cpu_ops + d.gpu_ops;
  b["gpu_op_fraction"] = ops > 0 ? static_cast<double>(d.gpu_ops) / static_cast<double>(ops) : 0.0;
  auto opt = [&](const char* k, int64_t v) {
    if (v >= 0) b[k] = v;
  };
  opt("queue_flushes", d.queue_flushes);
  opt("dispatches", d.dispatches);
  opt("syncs", d.syncs);
  opt("host_reads", d.host_reads);
  opt("bytes_up", d.bytes_up);
  opt("bytes_down", d.bytes_down);
  if (d.gpu_wait_ms >= 0) b["gpu_wait_ms"] = d.gpu_wait_ms;
  if (!d.gpu_ms.empty()) b["gpu_ms"] = d.gpu_ms;
  return {{"backend", b}};
}

}  // namespace alpha
