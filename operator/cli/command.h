#pragma once
// A `torus` subcommand. Each lives in its own file (validate_command.cc, run_command.cc, operator_command.cc)
// and is listed once in main.cc's table.
#include <string>
#include <string_view>
#include <vector>

namespace torus::cli {

struct Command {
  std::string_view name;
  std::string_view summary;  // one line for `torus --help`
  std::string_view usage;    // the full help for `torus <name> --help`
  // Runs with the arguments after the subcommand's name; returns the exit code (common/launch/exit_codes.h).
  int (*run)(const std::vector<std::string>& args);
};

}  // namespace torus::cli
