#pragma once
#include "options.h"

namespace tilecraft::cli {

// Each returns the process exit code (0 ok, 1 failures found). Usage errors and
// a missing GPU are thrown as tilecraft::Error and mapped in main.cpp.
// The whole command line (parse, dispatch, map errors to exit codes).
int run_main(int argc, char** argv);

int cmd_env(const Options& o);
int cmd_list(const Options& o);
int cmd_compile(const Options& o);
int cmd_test(const Options& o);
int cmd_bench(const Options& o);
int cmd_run(const Options& o);
int cmd_inspect(const Options& o);

}  // namespace tilecraft::cli
