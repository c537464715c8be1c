// The tilecraft binary: the command line of src/cli/app.cpp.
#include "commands.h"

int main(int argc, char** argv) { return tilecraft::cli::run_main(argc, argv); }
