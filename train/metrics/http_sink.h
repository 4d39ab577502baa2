// The HTTP metrics sink: POSTs batches of JSONL lines (Content-Type application/x-ndjson) to a URL from a
// background thread. push() never waits on the network: it appends to a bounded queue (the oldest line is
// dropped when full); failed posts are retried with exponential backoff, then dropped. Drops are counted.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace httplib {
class Client;
}

namespace alpha {

// Filled from the config keys metrics.http.* (docs/config.md); durations in seconds.
struct HttpSinkOptions {
  std::string url;            // http://host[:port][/path] or https://...; empty = no HTTP sink
  std::string token_env;      // name of an environment variable holding a bearer token; empty = no auth
  int64_t queue_lines = 10000;  // bound of the in-memory queue
  int64_t batch_lines = 500;    // most lines per POST
  double linger_s = 0.25;       // wait this long for more lines before posting a partial batch
  double timeout_s = 5;         // connect, read and write timeout of one POST
  int max_retries = 5;          // per batch, after the first attempt (5xx, 408, 429, network errors)
  double backoff_s = 0.5;       // first retry delay, doubled per retry up to backoff_max_s
  double backoff_max_s = 30;
  double close_timeout_s = 5;   // close(): time allowed for flushing what is queued (one attempt per batch)
};

struct HttpSinkStats {
  int64_t pushed = 0;          // lines handed to push()
  int64_t sent = 0;            // lines in batches the server accepted (2xx)
  int64_t dropped = 0;         // lines lost: queue overflow, retries exhausted, rejected (4xx), or left at close
  int64_t posts = 0;           // POST attempts
  int64_t failed_posts = 0;    // attempts that failed (network error or non-2xx)
  int64_t queued = 0;          // lines waiting or in flight now
  std::string last_error;      // of the latest failed attempt, e.g. "HTTP 500" or "Connection"
};

class HttpSink {
 public:
  // Throws ConfigError if the URL is malformed or token_env names an unset variable.
  explicit HttpSink(HttpSinkOptions opts);
  ~HttpSink();  // close()
  HttpSink(const HttpSink&) = delete;
  HttpSink& operator=(const HttpSink&) = delete;

  void push(std::string line) noexcept;  // one JSONL line without the trailing newline
  // Stops accepting lines, gives what is queued one attempt each until close_timeout_s, then drops the rest.
  // Bounded: returns within about close_timeout_s + timeout_s. Idempotent.
  void close();
  HttpSinkStats stats() const;
  const HttpSinkOptions& options() const { return opts_; }

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  bool post(const std::string& body, bool* retryable);  // one attempt
  HttpSinkOptions opts_;
  std::string path_;
  std::string token_;
  std::unique_ptr<httplib::Client> client_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  HttpSinkStats stats_;
  int64_t in_flight_ = 0;  // lines of the batch being posted
  bool closing_ = false;
  Clock::time_point deadline_;
  std::thread worker_;
};

// Splits "http://host:port/path" into ("http://host:port", "/path"); throws ConfigError naming the URL.
std::pair<std::string, std::string> split_http_url(const std::string& url);

}  // namespace alpha
