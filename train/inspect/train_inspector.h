// The training loop's white-box view (config metrics.inspect_interval, docs/metrics.md `inspect` records): on an
// inspect step it records activation statistics of the first sequence of the first micro-batch's forward, each parameter's gradient
// norm and a copy of its weights before the optimizer step, then the weight norm and update/weight ratio after it.
// Nothing runs on other steps. Reads GPU tensors back (the step's one extra sync) and works on f16 runs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "inspect/inspect.h"
#include "model/gpt.h"

namespace alpha {

class TrainInspector {
 public:
  // interval 0 = off. The last step (max_steps) is inspected too, so short runs get a record.
  TrainInspector(GPT& model, int64_t interval, int64_t max_steps);
  ~TrainInspector();
  bool due(int64_t step) const;  // step = the 1-based step being taken

  void begin_forward(int64_t step);  // before the first micro-batch: starts recording activations if due
  void end_forward();                // after its forward: stops recording
  // After backward (and any all-reduce), before clipping and the update. grad_scale divides the gradients
  // (a loss scale the optimizer has not removed yet; 1 otherwise).
  void before_update(double grad_scale);
  // After the update: the `inspect` record's fields ({step, params, activations}); empty unless due.
  nlohmann::json after_update();

 private:
  struct ParamSnap {
    double grad_norm = 0;
    std::vector<float> before;
  };
  GPT& model_;
  int64_t interval_, max_steps_, step_ = 0;
  bool active_ = false;
  std::unique_ptr<ActivationRecorder> rec_;
  std::vector<Activation> acts_;
  std::vector<ParamSnap> snaps_;
};

}  // namespace alpha
