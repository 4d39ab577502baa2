// The terminal view of a run: a live, rewritten line on a TTY; plain periodic lines otherwise (logs, CI).
#pragma once
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
  void finish();

 private:
  void clear_live();
  int64_t total_;
  int64_t every_;
  bool tty_;
  bool quiet_;
  bool live_ = false;
  double last_val_ = -1;
};

}  // namespace alpha
