#include "loop/data_parallel.h"

#include <algorithm>
#include <chrono>

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
  const std::vector<Tensor> params = model.parameters();
  for (const Tensor& p : params) full_bytes_ += 2 * p.numel() * static_cast<int64_t>(sizeof(float));
  held_bytes_ = full_bytes_;
  if (size_ == 1) return;
  // The GPU optimizer takes the all-reduced gradients from the host (uploaded by its first kernel); ZeRO's
  // per-rank state shards are host tensors, so they need the CPU one.
  ALPHA_CHECK(cfg.optim.device != "gpu" || cfg.optim.zero == 0, ConfigError,
              "[config] \"optim.zero\" 1 shards the host optimizer state: use optim.device cpu with it");
  if (cfg.model.dropout > 0) {  // one forward on a dummy batch counts the dropout draws of a micro-batch
    ag::NoGrad no_grad;
    Rng probe(0);
    const Tensor x = Tensor::zeros({batch_, block_}, DType::i32);
    model.loss(x, x, /*training=*/true, probe);
    dropout_per_micro_ = probe.state().position;
  }
  reducer_ = std::make_unique<dist::GradReducer>(params, kBucketBytes);
  zero_ = cfg.optim.zero == 1;
  if (!zero_) return;
  // Largest first to the rank holding the least so far (ties: the lower rank, then the lower index).
  std::vector<size_t> order(params.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return params[a].numel() > params[b].numel(); });
  std::vector<int64_t> load(static_cast<size_t>(size_), 0);
  owner_.assign(params.size(), 0);
  for (size_t k : order) {
    const auto r = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    owner_[k] = static_cast<int>(r);
    load[r] += params[k].numel();
  }
  held_bytes_ = 2 * load[static_cast<size_t>(rank_)] * static_cast<int64_t>(sizeof(float));
}

void DataParallel::shard_optimizer(AdamW& opt) {
  if (!zero_) return;
  for (size_t k = 0; k < owner_.size(); ++k)
    if (owner_[k] != rank_) opt.exp_avg()[k] = Tensor(), opt.exp_avg_sq()[k] = Tensor();
}

void DataParallel::unshard_optimizer(AdamW& opt, bool for_save) {
  if (!zero_) return;
  const std::vector<Tensor>& params = opt.params();
  for (size_t k = 0; k < owner_.size(); ++k) {
    for (Tensor* s : {&opt.exp_avg()[k], &opt.exp_avg_sq()[k]}) {
      if (!s->defined() && (!for_save || rank_ == 0)) *s = Tensor::zeros(params[k].shape(), DType::f32);
      if (!for_save || owner_[k] == 0) continue;
      const int tag = static_cast<int>(2 * k) + (s == &opt.exp_avg()[k] ? 0 : 1);
      if (rank_ == owner_[k]) dist::World::send_f32(s->data<float>(), s->numel(), 0, tag, "ZeRO state to rank 0");
      else if (rank_ == 0) dist::World::recv_f32(s->mutable_data<float>(), s->numel(), owner_[k], tag, "ZeRO state to rank 0");
    }
  }
}

void DataParallel::before_step(const std::vector<Tensor>& params) {
  if (!zero_) return;
  for (size_t k = 0; k < owner_.size(); ++k)
    if (owner_[k] != rank_) Tensor(params[k]).set_grad(Tensor());  // a handle: the grad slot is shared
}

void DataParallel::after_step(const std::vector<Tensor>& params) {
  if (!zero_) return;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t k = 0; k < owner_.size(); ++k) {
    Tensor p = params[k];
    dist::World::broadcast_f32(p.mutable_data<float>(), p.numel(), owner_[k], "ZeRO parameter all-gather");
  }
  zero_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
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
      {step_ms, s.comm_ms, s.wait_ms, s.copy_ms, static_cast<double>(s.bytes), static_cast<double>(held_bytes_),
       zero_ms_}, "metrics gather");
  nlohmann::json ranks = nlohmann::json::array();
  double slowest_step = 0, slowest_allreduce = 0;
  for (int r = 0; r < size_; ++r) {
    const double* v = all.data() + 7 * r;
    slowest_step = std::max(slowest_step, v[0]);
    slowest_allreduce = std::max(slowest_allreduce, v[1]);
    ranks.push_back({{"rank", r}, {"step_ms", v[0]}, {"allreduce_ms", v[1]}, {"allreduce_wait_ms", v[2]},
                     {"grad_copy_ms", v[3]}, {"allreduce_bytes", static_cast<int64_t>(v[4])},
                     {"adamw_state_bytes", static_cast<int64_t>(v[5])}});
    if (zero_) ranks.back()["zero_allgather_ms"] = v[6];
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
