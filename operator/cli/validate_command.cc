#include "operator/cli/validate_command.h"

#include <cstdio>

#include "common/api/codec.h"
#include "common/api/defaults.h"
#include "common/api/validation.h"
#include "common/launch/exit_codes.h"

namespace torus::cli {

const std::string_view kValidateSummary =
    "check TrainingJob files; print every error as FILE:line:column: path: message";
const std::string_view kValidateUsage =
    "usage: torus validate [--print-defaulted] FILE...\n"
    "\n"
    "Reads each TrainingJob file (YAML, or JSON when it ends in .json), applies the defaults and validates it.\n"
    "Prints one line per error, `FILE:line:column: path: message`, and nothing for a valid file. The position is\n"
    "the field's key (a list element: the element); a missing field points at the map it is missing from. JSON\n"
    "files have no positions: `FILE: path: message`.\n"
    "\n"
    "  --print-defaulted  also print each valid job, with every default filled in, as YAML on stdout\n"
    "\n"
    "Exit status: 0 every file is valid, 1 some file is not, 2 bad command line.\n";

namespace {

enum class PrintDefaulted { kNo, kYes };

// Returns true when the file is valid.
bool validate_one(const std::string& file, PrintDefaulted print) {
  const api::Decoded decoded = api::decode_file(file);
  const api::FieldErrors errors = api::check_decoded(decoded);
  for (const auto& e : errors) std::printf("%s\n", e.to_string(file).c_str());
  if (errors.empty() && print == PrintDefaulted::kYes) {
    std::printf("# %s\n%s---\n", file.c_str(), api::to_yaml(api::with_defaults(decoded.job)).c_str());
  }
  return errors.empty();
}

}  // namespace

int validate_command(const std::vector<std::string>& args) {
  PrintDefaulted print = PrintDefaulted::kNo;
  std::vector<std::string> files;
  for (const auto& arg : args) {
    if (arg == "--print-defaulted") {
      print = PrintDefaulted::kYes;
    } else if (arg.size() > 1 && arg[0] == '-') {
      std::fprintf(stderr, "torus validate: unknown flag '%s'\n%.*s", arg.c_str(),
                   static_cast<int>(kValidateUsage.size()), kValidateUsage.data());
      return to_int(launch::ExitCode::kUsage);
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "torus validate: no files given\n%.*s", static_cast<int>(kValidateUsage.size()),
                 kValidateUsage.data());
    return to_int(launch::ExitCode::kUsage);
  }
  bool all_valid = true;
  for (const auto& file : files) all_valid = validate_one(file, print) && all_valid;
  std::fflush(stdout);
  return to_int(all_valid ? launch::ExitCode::kSuccess : launch::ExitCode::kFailure);
}

}  // namespace torus::cli
