// The terminal view of a run: a live, rewritten line on a TTY; plain periodic lines otherwise (logs, CI).
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace alpha {

class Progress {
 public:
  Progress(int64_t total_steps, bool quiet);
  // Called every step; prints when on a TTY or every `every` steps otherwise.
  void step(int64_t step, double loss, double lr, double tokens_per_sec, double elapsed_s);
  void eval(int64_t step, double train_loss, double val_loss);
  void message(const std::string& line);  // a permanent line (clears the live line first)
  // Long set-up work (data preparation, shader pipelines): a live "what done/total (pct)" line on a TTY; on
  // done == total a permanent "what: total in 1.2 s" line (TTY or not). Call with done = 0 first.
  void task(const std::string& what, int64_t done, int64_t total);
  void finish();

 private:
  void clear_live();
  int64_t total_;
  int64_t every_;
  bool tty_;
  bool quiet_;
  bool live_ = false;
  double last_val_ = -1;
  std::string task_;
  std::chrono::steady_clock::time_point task_start_{};
};

}  // namespace alpha
