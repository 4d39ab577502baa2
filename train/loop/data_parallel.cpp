#include "loop/data_parallel.h"

#include <algorithm>

#include <fmt/format.h>

#include "autograd/tape.h"
#include "dist/comm.h"

namespace alpha {

namespace {
constexpr int64_t kBucketBytes = int64_t{4} << 20;  // PyTorch DDP's first bucket is 1 MiB, the rest 25 MiB
}

DataParallel::DataParallel(const Config& cfg, const GPT& model)
    : rank_(dist::World::rank()), size_(dist::World::size()), accum_(cfg.train.grad_accum),
      batch_(cfg.train.batch_size), block_(cfg.model.block_size) {
  if (size_ == 1) return;
  ALPHA_CHECK(cfg.optim.device != "gpu", ConfigError,
              "[config] \"optim.device\" \"gpu\" does not run on several MPI ranks yet (the gradient all-reduce "
              "goes through the host): use optim.device cpu");
  if (cfg.model.dropout > 0) {  // one forward on a dummy batch counts the dropout draws of a micro-batch
    ag::NoGrad no_grad;
    Rng probe(0);
    const Tensor x = Tensor::zeros({batch_, block_}, DType::i32);
    model.loss(x, x, /*training=*/true, probe);
    dropout_per_micro_ = probe.state().position;
  }
  reducer_ = std::make_unique<dist::GradReducer>(model.parameters(), kBucketBytes);
}

std::string DataParallel::describe() const {
  return fmt::format("rank {} of {} (local {})", rank_, size_, dist::World::local_rank());
}

void DataParallel::begin_step(const TextData& data, Rng& data_rng, Rng& dropout_rng) {
  if (size_ == 1) return;
  data.skip(false, batch_, block_, data_rng, rank_ * accum_);
  dropout_start_ = dropout_rng.state();
  dropout_rng.set_state({dropout_start_.seed, dropout_start_.position + rank_ * accum_ * dropout_per_micro_});
  reducer_->reset_stats();
}

void DataParallel::end_step(const TextData& data, Rng& data_rng, Rng& dropout_rng) {
  if (size_ == 1) return;
  data.skip(false, batch_, block_, data_rng, (size_ - 1 - rank_) * accum_);
  const uint64_t used = dropout_rng.state().position - dropout_start_.position - rank_ * accum_ * dropout_per_micro_;
  ALPHA_CHECK(used == accum_ * dropout_per_micro_, Error,
              "[dist] rank {}: a micro-batch drew {} dropout positions, the probe counted {}: ranks would diverge",
              rank_, used / static_cast<uint64_t>(accum_), dropout_per_micro_);
  dropout_rng.set_state({dropout_start_.seed, dropout_start_.position + size_ * accum_ * dropout_per_micro_});
}

ag::LeafReadyFn DataParallel::grad_hook() {
  if (size_ == 1) return {};
  return [r = reducer_.get()](const Tensor& leaf) { r->on_ready(leaf); };
}

void DataParallel::reduce_grads() {
  if (size_ > 1) reducer_->finish();
}

double DataParallel::reduce_loss(double loss_sum, bool& stop) {
  if (size_ == 1) return loss_sum;
  std::vector<double> v = {loss_sum, stop ? 1.0 : 0.0};
  dist::World::sum_f64(v, "loss all-reduce");
  stop = v[1] > 0;
  return v[0];
}

nlohmann::json DataParallel::rank_fields(double step_ms) {
  if (size_ == 1) return nlohmann::json::object();
  const dist::GradReducer::Stats& s = reducer_->stats();
  const std::vector<double> all = dist::World::allgather_f64(
      {step_ms, s.comm_ms, s.wait_ms, s.copy_ms, static_cast<double>(s.bytes)}, "metrics gather");
  nlohmann::json ranks = nlohmann::json::array();
  double slowest_step = 0, slowest_allreduce = 0;
  for (int r = 0; r < size_; ++r) {
    const double* v = all.data() + 5 * r;
    slowest_step = std::max(slowest_step, v[0]);
    slowest_allreduce = std::max(slowest_allreduce, v[1]);
    ranks.push_back({{"rank", r}, {"step_ms", v[0]}, {"allreduce_ms", v[1]}, {"allreduce_wait_ms", v[2]},
                     {"grad_copy_ms", v[3]}, {"allreduce_bytes", static_cast<int64_t>(v[4])}});
  }
  // Top-level: this step's rank 0 figures (dash charts them); "ranks" holds everyone's.
  return {{"world_size", size_}, {"allreduce_ms", s.comm_ms}, {"allreduce_wait_ms", s.wait_ms},
          {"grad_copy_ms", s.copy_ms}, {"allreduce_bytes", s.bytes}, {"max_rank_step_ms", slowest_step},
          {"max_rank_allreduce_ms", slowest_allreduce}, {"ranks", ranks}};
}

std::string DataParallel::share_checkpoint(const std::string& path_on_leader) {
  std::string path = path_on_leader;
  dist::World::broadcast(path, "checkpoint barrier");
  return path;
}

}  // namespace alpha
