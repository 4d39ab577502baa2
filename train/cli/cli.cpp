#include "cli/cli.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "cli/bench.h"
#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "metrics/dash.h"
#include "data/data.h"
#include "loop/run_checkpoint.h"
#include "loop/trainer.h"
#include "dist/comm.h"
#include "vk/check.h"

namespace alpha {

namespace {

constexpr const char* kMainHelp = R"(alpha — train GPT models on the CPU or any Vulkan GPU

usage: alpha <command> [options]

commands:
  train CONFIG [--set key=value]... [--json] [--quiet] [--resume [PATH]]
                      train a GPT from a JSON config (see docs/config.md)
  export CHECKPOINT --format safetensors OUT
                      write a checkpoint's model as GPT-2-named safetensors
  sample CHECKPOINT [--prompt TEXT] [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
                      stream text from a trained model (`alpha sample --help`)
  inspect MODEL --prompt TEXT [--json] [--compare B]
                      one white-box forward: activation stats per layer, attention per head, logit lens;
                      --compare: the first activation where two models differ (`alpha inspect --help`)
  eval CHECKPOINT [--data PATH] [--iters N]
                      loss and perplexity on the val split or a text file
  prepare --tokenizer KIND [--vocab-size N] [--tokenizer-path DIR] IN.txt OUT_DIR | prepare CONFIG [OUT_DIR]
                      tokenize text once into OUT_DIR/train.bin, val.bin, tokenizer.json (docs/data-format.md)
  bench cpu [--json] [--kernels] [--gpt2] [--profile]  CPU matmul GFLOP/s at GPT shapes, transformer-block
                      step time; --kernels: per-kernel GB/s, GFLOP/s vs this CPU's peaks; --gpt2: GPT-2 small
                      fwd+bwd B4 T256; --profile: --gpt2 plus one step's ms per CPU op and input shapes
  bench gpu [--device D] [--config CONFIG] [--set k=v]... [--steps N] [--peak-tflops X] [--json]
            [--gemm M,K,N[,ta,tb]]... [--tiles] [--only gemm,kernels,attention,step,overlap] [--optim gpu|cpu] [--quick]
                      Vulkan GEMM TFLOP/s per kernel (--tiles: per coopmat block tile), memory-bound kernel GB/s,
                      causal attention fwd/bwd ms, GPT training step ms (the config's model, batch, grad_accum,
                      precision and optim.name: adamw or muon; default shakespeare_char)
  info [CONFIG] [--set key=value]... [--device SPEC]
                      Vulkan devices, the device a run would use, its features and limits, thresholds
  calibrate [--device vulkan[:N]] [--out PATH] [--quick] [--json]
                      measure where the GPU beats the CPU per op class and size; save a dispatch profile
                      (use it with dispatch.profile=auto)
  dash [RUN_DIR|metrics.jsonl ...] [--port 8080]
                      live web dashboard of runs on http://127.0.0.1:8080/
  --help              this text; `alpha train --help` for the train command
  --version           print the version

exit codes: 0 ok, 1 runtime error, 2 usage or config error, 3 bad input data, 4 checkpoint error,
            5 numerics stop (non-finite values, guard.max_bad_steps in a row; the last checkpoint is intact),
            6 GPU fault (device lost or hung, out of device memory; checkpoints already written are intact),
            7 `inspect --compare`: the models' activations differ,
            130 interrupted (SIGINT/SIGTERM; a checkpoint was saved)
)";

constexpr const char* kTrainHelp = R"(usage: alpha train CONFIG [--set key=value]... [--json] [--quiet] [--resume [PATH]]

Trains the model described by CONFIG (a JSON file; every key is documented in docs/config.md).

options:
  --set key=value   override a config key, dotted path, e.g. --set train.max_steps=100
                    (value parsed as JSON if it parses, else taken as a string); repeatable
  --json            also stream the metrics JSONL records to stdout
  --quiet           no progress output on stderr
  --resume [PATH]   continue exactly from checkpoint PATH, or from the latest one in out_dir (OUT_DIR/latest);
                    the model shape, vocabulary and tokenizer must match (docs/checkpoint-format.md)

The resolved config is printed and saved as OUT_DIR/config.json; metrics go to OUT_DIR/metrics.jsonl.
Checkpoints (OUT_DIR/ckpt-<step>.alph) are saved every checkpoint.interval steps, at the end, and on
SIGINT/SIGTERM: the current step finishes, a checkpoint is saved and alpha exits 130 (a second signal
exits at once; checkpoint files are never left half-written).
exit codes: 0 ok, 1 runtime error, 2 usage or config error, 3 bad input data, 4 checkpoint error,
            5 numerics stop (see guard.* in docs/config.md; the last checkpoint is intact),
            6 GPU fault (device lost or hung, out of device memory; checkpoints written before are intact),
            130 interrupted (checkpoint saved)
)";

struct UsageError : Error {
  using Error::Error;
};

int cmd_train(const std::vector<std::string>& args) {
  std::string config_path;
  std::vector<std::string> overrides;
  TrainOptions opt;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kTrainHelp, stdout);
      return kExitOk;
    } else if (a == "--set") {
      ALPHA_CHECK(i + 1 < args.size(), UsageError, "[cli] --set needs key=value");
      overrides.push_back(args[++i]);
    } else if (a.rfind("--set=", 0) == 0) {
      overrides.push_back(a.substr(6));
    } else if (a == "--json") {
      opt.json_stdout = true;
    } else if (a == "--quiet") {
      opt.quiet = true;
    } else if (a == "--resume") {  // optional PATH: the next argument unless it is an option or the config
      opt.resume = "latest";
      if (i + 1 < args.size() && !args[i + 1].empty() && args[i + 1][0] != '-' && !config_path.empty()) opt.resume = args[++i];
    } else if (a.rfind("--resume=", 0) == 0) {
      opt.resume = a.substr(9);
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError(fmt::format("[cli] unknown option \"{}\" for train (see alpha train --help)", a));
    } else {
      ALPHA_CHECK(config_path.empty(), UsageError, "[cli] more than one config file: \"{}\" and \"{}\"", config_path, a);
      config_path = a;
    }
  }
  ALPHA_CHECK(!config_path.empty(), UsageError, "[cli] train needs a CONFIG file (see alpha train --help)");
  for (const std::string& o : overrides)
    ALPHA_CHECK(o.find('=') != std::string::npos, UsageError, "[cli] --set \"{}\" is not key=value", o);
  const Config cfg = load_config(config_path, overrides);
  if (dist::World::rank() != 0) opt.quiet = true, opt.json_stdout = false;  // MPI: rank 0 speaks for the run
  if (!opt.quiet) std::fprintf(stderr, "config (resolved):\n%s\n", config_to_json(cfg).dump(2).c_str());
  const TrainResult r = run_training(cfg, opt);
  if (!opt.quiet) {
    std::fprintf(stderr, "done: %lld steps in %.1f s, train loss %.4f, val loss %.4f\n",
                 static_cast<long long>(r.steps), r.seconds, r.train_loss, r.val_loss);
    if (!r.sample.empty()) std::fprintf(stderr, "sample:\n%s\n", r.sample.c_str());
  }
  if (r.interrupted) {
    std::fprintf(stderr, "interrupted: saved %s\n", r.checkpoint.c_str());
    return kExitInterrupted;
  }
  if (r.numerics_stop) {
    std::fprintf(stderr, "stopped by the numerics guard after %lld steps; last checkpoint: %s\n",
                 static_cast<long long>(r.steps), r.checkpoint.empty() ? "none" : r.checkpoint.c_str());
    return kExitNumerics;
  }
  return kExitOk;
}

// A numeric option value in [lo, hi], else a usage error naming the option.
double number_arg(const std::string& name, const std::string& v, double lo, double hi) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  ALPHA_CHECK(!v.empty() && *end == '\0' && x >= lo && x <= hi, UsageError, "[cli] {} needs a number in [{}, {}], got \"{}\"",
              name, lo, hi, v);
  return x;
}

constexpr const char* kBenchHelp =
    R"(usage: alpha bench cpu [--json] [--kernels] [--gpt2] [--profile]
       alpha bench gpu [--device D] [--config CONFIG] [--set k=v]... [--steps N] [--peak-tflops X] [--json]
                       [--gemm M,K,N[,ta,tb]]... [--tiles [--walks B,B...|--alternate T,T...]] [--only gemm,kernels,attention,step,overlap]
                       [--optim gpu|cpu] [--step-split] [--quick]

bench cpu: CPU matmul GFLOP/s at GPT shapes and a transformer block's step time.
  --kernels   per-kernel GB/s and GFLOP/s against this CPU's memory and FMA peaks
  --gpt2      GPT-2 small forward + backward at B4 T256
  --profile   --gpt2 plus one step's milliseconds per CPU op, with input shapes
bench gpu: Vulkan timings (timestamps, warm-up, medians) for the config's model (default shakespeare_char).
  --gemm      extra GEMM shapes;  --tiles  every cooperative-matrix block tile at every shape
  --walks     with --tiles: the per-shape tiles' walk twins at each band height of the workgroup walk (the tiles use 8)
  --alternate with --tiles: only these tiles (auto = the per-shape choice, coopmat = the per-shape coopmat tile
              with the PTX path on, NAME:f32 = f32 out), timed in turn over
              5 rounds, each one's median and rounds (an A/B of tiles within one process)
  --only      a comma list of gemm, kernels, attention, step; overlap (only when named: weight gradients
              beside the backward's memory-bound kernels, no barrier between; half batches interleaved)
  --optim     the step's optimizer state on the gpu (default) or cpu; optim.name picks adamw or muon
  --steps N   timed training steps (10), after >= 3 warm-up steps and 1 s (the GPU's clocks ramp up); then N
              more with a timestamp where each submission starts and ends: the GPU's busy and idle ms per step
  --step-split  a host wait after the backward, to time it and the optimizer apart (the trainer has none)
  --peak-tflops X  the GPU's dense f16 peak, for the step's MFU
  --quick     a smoke run: small cases, few repetitions
--json prints one JSON object instead of the tables.
)";

int cmd_bench(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") {
      std::fputs(kBenchHelp, stdout);
      return kExitOk;
    }
  ALPHA_CHECK(!args.empty() && (args[0] == "cpu" || args[0] == "gpu"), UsageError,
              "[cli] usage: alpha bench cpu|gpu [options] (see alpha bench --help)");
  if (args[0] == "cpu") {
    bool json = false, kernels = false, gpt2 = false, profile = false;
    for (size_t i = 1; i < args.size(); ++i) {
      ALPHA_CHECK(args[i] == "--json" || args[i] == "--kernels" || args[i] == "--gpt2" || args[i] == "--profile",
                  UsageError, "[cli] unknown option \"{}\" for bench cpu (see alpha bench --help)", args[i]);
      (args[i] == "--json" ? json : args[i] == "--kernels" ? kernels : args[i] == "--gpt2" ? gpt2 : profile) = true;
    }
    run_cpu_bench(json, kernels, gpt2, profile);
    return kExitOk;
  }
  GpuBenchOptions o;
  std::string config_path;
  std::vector<std::string> overrides;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      ALPHA_CHECK(i + 1 < args.size(), UsageError, "[cli] {} needs a value", a);
      return args[++i];
    };
    if (a == "--json") o.json = true;
    else if (a == "--quick") o.quick = true;
    else if (a == "--device") o.device = value();
    else if (a == "--config") config_path = value();
    else if (a == "--set") overrides.push_back(value());
    else if (a == "--gemm") o.gemm.push_back(value());
    else if (a == "--tiles") o.tiles = true;
    else if (a == "--step-split") o.step_split = true;
    else if (a == "--walks") {  // comma-separated band heights
      const std::string& v = value();
      for (size_t b = 0; b <= v.size();) {
        const size_t e = std::min(v.find(',', b), v.size());
        const double w = number_arg(a, v.substr(b, e - b), 1, 65535);
        ALPHA_CHECK(w == std::floor(w), UsageError, "[cli] --walks takes whole numbers of tiles, got \"{}\"", v);
        o.walks.push_back(static_cast<uint32_t>(w));
        b = e + 1;
      }
    }
    else if (a == "--alternate") {  // comma-separated tile names
      const std::string& v = value();
      for (size_t b = 0; b <= v.size();) {
        const size_t e = std::min(v.find(',', b), v.size());
        ALPHA_CHECK(e > b, UsageError, "[cli] --alternate takes tile names separated by commas, got \"{}\"", v);
        o.alternate.push_back(v.substr(b, e - b));
        b = e + 1;
      }
    }
    else if (a == "--only") o.only = value();
    else if (a == "--optim") o.optim_device = value();
    else if (a == "--steps") o.steps = static_cast<int>(number_arg(a, value(), 1, 100000));
    else if (a == "--peak-tflops") o.peak_tflops = number_arg(a, value(), 0, 1e6);
    else throw UsageError(fmt::format("[cli] unknown option \"{}\" for bench gpu (see alpha bench --help)", a));
  }
  if (!config_path.empty() || !overrides.empty()) {
    const Config cfg = config_path.empty() ? load_config_text("{}", overrides, "bench") : load_config(config_path, overrides);
    o.model = gpt_config(cfg.model, cfg.model.vocab_size > 0 ? cfg.model.vocab_size : 65);
    o.batch = cfg.train.batch_size;
    o.grad_accum = static_cast<int>(cfg.train.grad_accum);
    o.defer_weight_grads = cfg.train.defer_weight_grads;
    o.overlap_steps = cfg.train.overlap_steps;
    o.optim = cfg.optim;
  }
  ALPHA_CHECK(o.optim_device == "gpu" || o.optim_device == "cpu", UsageError, "[cli] --optim must be gpu or cpu, got \"{}\"",
              o.optim_device);
  for (size_t b = 0; b < o.only.size();) {  // --only names known sections
    const size_t e = std::min(o.only.find(',', b), o.only.size());
    const std::string sec = o.only.substr(b, e - b);
    ALPHA_CHECK(sec == "gemm" || sec == "kernels" || sec == "attention" || sec == "step" || sec == "overlap", UsageError,
                "[cli] --only takes gemm, kernels, attention, step, overlap (comma-separated), got \"{}\"", sec);
    b = e + 1;
  }
  ALPHA_CHECK(o.walks.empty() || o.tiles, UsageError, "[cli] --walks goes with --tiles");
  ALPHA_CHECK(o.alternate.empty() || (o.tiles && o.walks.empty()), UsageError,
              "[cli] --alternate goes with --tiles, not with --walks");
  if (o.quick) o.warmup = 1, o.warmup_s = 0, o.steps = 2;
  run_gpu_bench(o);
  return kExitOk;
}

}  // namespace

int run_cli(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
      std::fputs(kMainHelp, args.empty() ? stderr : stdout);
      return args.empty() ? kExitUsage : kExitOk;
    }
    if (args[0] == "--version") {
      std::printf("alpha %s\n", ALPHA_VERSION);
      return kExitOk;
    }
    const std::string cmd = args[0];
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (cmd == "train") return cmd_train(rest);
    if (cmd == "bench") return cmd_bench(rest);
    if (cmd == "dash") return cmd_dash(rest);
    if (cmd == "export") return cmd_export(rest);
    if (cmd == "info") return cmd_info(rest);
    if (cmd == "sample") return cmd_sample(rest);
    if (cmd == "inspect") return cmd_inspect(rest);
    if (cmd == "eval") return cmd_eval(rest);
    if (cmd == "prepare") return cmd_prepare(rest);
    if (cmd == "calibrate") return cmd_calibrate(rest);
    throw UsageError(fmt::format("[cli] unknown command \"{}\" (see alpha --help)", cmd));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitUsage;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitUsage;
  } catch (const DataError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitData;
  } catch (const CheckpointError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitCheckpoint;
  } catch (const vk::DeviceLostError& e) {
    std::fprintf(stderr, "error: %s\n[vk] GPU fault: the device was lost or stopped responding; the run stopped "
                 "without saving (checkpoints already written are untouched: continue with --resume)\n", e.what());
    return kExitGpuFault;
  } catch (const vk::OutOfMemoryError& e) {
    std::fprintf(stderr, "error: %s\n[vk] GPU fault: out of memory; the run stopped without saving (checkpoints "
                 "already written are untouched): use a smaller model or batch\n", e.what());
    return kExitGpuFault;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitRuntime;
  }
}

}  // namespace alpha
