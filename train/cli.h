// The `alpha` command line. Exit codes (docs/cli.md): 0 ok, 1 runtime error, 2 usage or config error,
// 3 bad input data.
#pragma once

namespace alpha {

enum ExitCode : int { kExitOk = 0, kExitRuntime = 1, kExitUsage = 2, kExitData = 3 };

int run_cli(int argc, char** argv);

}  // namespace alpha
