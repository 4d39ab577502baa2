#include "cli/cli.h"

int main(int argc, char** argv) { return alpha::run_cli(argc, argv); }
