// `torus`: the command-line front end. Each subcommand lives in its own file; this is only the table.
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "common/launch/exit_codes.h"
#include "common/util/main_guard.h"
#include "operator/cli/command.h"
#if TORUS_WITH_OPERATOR
#include "operator/cli/operator_command.h"
#endif
#include "operator/cli/run_command.h"
#include "operator/cli/validate_command.h"

namespace torus::cli {
namespace {

// One line per subcommand: {name, summary, usage, function}.
const std::array kCommands = {
    Command{"validate", kValidateSummary, kValidateUsage, validate_command},
    Command{"run", kRunSummary, kRunUsage, run_command},
#if TORUS_WITH_OPERATOR  // CMake option TORUS_WITH_OPERATOR
    Command{"operator", kOperatorSummary, kOperatorUsage, operator_command},
#endif
};

void print_help(std::FILE* out) {
  std::fprintf(out, "usage: torus <command> [args...]\n\ncommands:\n");
  for (const auto& c : kCommands) {
    std::fprintf(out, "  %-10.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.summary.size()), c.summary.data());
  }
  std::fprintf(out, "\n`torus <command> --help` describes a command.\n");
}

const Command* find_command(std::string_view name) {
  for (const auto& c : kCommands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

bool wants_help(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

int dispatch(int argc, char** argv) {
  if (argc < 2) {
    print_help(stderr);
    return to_int(launch::ExitCode::kUsage);
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    const Command* c = argc > 2 ? find_command(argv[2]) : nullptr;
    if (c) {
      std::printf("%.*s", static_cast<int>(c->usage.size()), c->usage.data());
    } else {
      print_help(stdout);
    }
    return to_int(launch::ExitCode::kSuccess);
  }
  const Command* command = find_command(name);
  if (!command) {
    std::fprintf(stderr, "torus: unknown command '%s'\n\n", name.c_str());
    print_help(stderr);
    return to_int(launch::ExitCode::kUsage);
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (wants_help(args)) {
    std::printf("%.*s", static_cast<int>(command->usage.size()), command->usage.data());
    return to_int(launch::ExitCode::kSuccess);
  }
  return command->run(args);
}

}  // namespace
}  // namespace torus::cli

int main(int argc, char** argv) {
  return torus::run_main("torus", [&]() -> int { return torus::cli::dispatch(argc, argv); });
}
