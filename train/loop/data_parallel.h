// The training loop's data-parallel side (issue 17): `mpirun -np N alpha train` runs the same loop on N ranks.
// Every rank walks the same global data stream; rank r trains on micro-batches [r A, (r + 1) A) of the N A
// micro-batches of each step (A = train.grad_accum), exactly the ones micro-steps r A ... of a single process
// with grad_accum N A take, and steps over the others (TextData::skip). Its dropout stream starts where that
// process's would (the draws per micro-batch are fixed by the shapes: measured once by a probe forward).
// Gradients are seeded 1 / (N A) and summed in rank order by dist::GradReducer, so the update is the single
// process's up to float summation order (bit-equal for A = 1). Model and AdamW state are full on every rank
// (so a checkpoint does not depend on N); rank 0 alone writes checkpoints and metrics.
// optim.zero 1 (ZeRO-1): each parameter's AdamW state (m, v) lives only on its owner rank (parameters dealt
// out largest first to the least-loaded rank), which updates the parameter and broadcasts it (the all-gather of
// the parameters). The arithmetic is the unsharded update's, so the bits are too; a save gathers m and v on
// rank 0, so checkpoints stay whole and independent of N and of optim.zero.
// With one rank (no mpirun) every call is a no-op and the loop is exactly the single-process loop.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "autograd/tape.h"
#include "core/rng.h"
#include "config/config.h"
#include "data/data.h"
#include "dist/grad_reducer.h"
#include "model/gpt.h"
#include "optim/adamw.h"

namespace alpha {

class DataParallel {
 public:
  // Refuses (ConfigError) what does not run on several ranks yet. Runs the dropout probe when needed.
  DataParallel(const Config& cfg, const GPT& model);

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool leader() const { return rank_ == 0; }  // writes checkpoints, metrics, progress
  bool active() const { return size_ > 1; }
  // Micro-batches in one optimizer step over all ranks (N A): the backward seed is 1 / this.
  int64_t global_micro_steps() const { return size_ * accum_; }
  std::string describe() const;  // "rank 0 of 2 (local 0)"

  // Around this rank's micro-steps of a step: position the data and dropout streams, then move both to where
  // the whole global step leaves them (identical on every rank).
  void begin_step(const TextData& data, Rng& data_rng, Rng& dropout_rng);
  void end_step(const TextData& data, Rng& data_rng, Rng& dropout_rng);
  // The leaf-ready hook for the step's last backward (empty with one rank).
  ag::LeafReadyFn grad_hook();
  // Sums the gradients over the ranks (waits for the buckets the hook started).
  void reduce_grads();
  // Sums this rank's loss over the ranks, and agrees on stopping (any rank's signal stops all at this step).
  double reduce_loss(double loss_sum, bool& stop);
  // Collective at log steps: every rank's step ms, all-reduce ms / bytes for the metrics' step record.
  nlohmann::json rank_fields(double step_ms);
  // Rank 0's checkpoint path to every rank, once its file is complete (a barrier after the save).
  std::string share_checkpoint(const std::string& path_on_leader);

  // ZeRO-1 (no-ops unless optim.zero is 1 on several ranks).
  bool zero() const { return zero_; }
  void shard_optimizer(AdamW& opt);  // drops m, v of the parameters this rank does not own
  // Gives m, v back their storage (zeros) so a checkpoint can be restored into them; for_save: only rank 0,
  // which receives every owner's m, v instead (the others send theirs).
  void unshard_optimizer(AdamW& opt, bool for_save);
  void before_step(const std::vector<Tensor>& params);  // grads of parameters owned elsewhere dropped: AdamW skips them
  void after_step(const std::vector<Tensor>& params);   // each owner broadcasts its updated parameters
  int64_t adamw_state_bytes() const { return held_bytes_; }  // m + v this rank holds
  int64_t adamw_state_bytes_unsharded() const { return full_bytes_; }

 private:
  int rank_ = 0, size_ = 1;
  int64_t accum_ = 1, batch_ = 1, block_ = 1;
  uint64_t dropout_per_micro_ = 0;  // dropout stream positions one micro-batch's forward takes
  RngState dropout_start_;
  std::unique_ptr<dist::GradReducer> reducer_;
  bool zero_ = false;
  std::vector<int> owner_;  // ZeRO-1: the rank that holds each parameter's m, v
  int64_t held_bytes_ = 0, full_bytes_ = 0;
  double zero_ms_ = 0;      // this step's parameter broadcasts
};

}  // namespace alpha
