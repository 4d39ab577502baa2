// The `alpha` command line. Exit codes (README, `alpha --help`): 0 ok, 1 runtime error, 2 usage or config error,
// 3 bad input data, 4 checkpoint error (missing, damaged or incompatible), 5 numerics stop (non-finite values,
// docs/reliability.md), 6 GPU fault (device lost, hung or out of device memory; checkpoints already written are
// untouched), 7 `inspect --compare` found a difference, 130 training interrupted by
// SIGINT/SIGTERM after saving a checkpoint.
#pragma once
#include <string>
#include <vector>

namespace alpha {

enum ExitCode : int {
  kExitOk = 0,
  kExitRuntime = 1,
  kExitUsage = 2,
  kExitData = 3,
  kExitCheckpoint = 4,
  kExitNumerics = 5,  // the numerics guard stopped training (guard.max_bad_steps bad steps in a row)
  kExitGpuFault = 6,  // the Vulkan device was lost (or stopped responding) or ran out of memory
  kExitDiffer = 7,    // `alpha inspect --compare`: the two models' activations differ beyond the tolerance
  kExitInterrupted = 130,
};

int run_cli(int argc, char** argv);

// Subcommands living in their own files (args exclude the command name).
int cmd_export(const std::vector<std::string>& args);  // train/cli/cmd_export.cpp
int cmd_info(const std::vector<std::string>& args);    // train/cli/cmd_info.cpp
int cmd_sample(const std::vector<std::string>& args);  // train/cli/cmd_sample.cpp
int cmd_eval(const std::vector<std::string>& args);    // train/cli/cmd_eval.cpp
int cmd_prepare(const std::vector<std::string>& args); // train/cli/cmd_prepare.cpp
int cmd_calibrate(const std::vector<std::string>& args);  // train/cli/cmd_calibrate.cpp
int cmd_inspect(const std::vector<std::string>& args);    // train/cli/cmd_inspect.cpp
// `alpha dash [RUN_DIR|metrics.jsonl ...] [--port 8080] [--host 127.0.0.1]`
int cmd_dash(const std::vector<std::string>& args);       // train/cli/cmd_dash.cpp

}  // namespace alpha
