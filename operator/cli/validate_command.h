#pragma once
// `torus validate FILE...`: checks TrainingJob files (decode, defaults, validation) and prints every error.
#include <string>
#include <string_view>
#include <vector>

namespace torus::cli {

extern const std::string_view kValidateSummary;
extern const std::string_view kValidateUsage;

// Exit 0 when every file is a valid TrainingJob, 1 when any is not, 2 on a bad command line.
int validate_command(const std::vector<std::string>& args);

}  // namespace torus::cli
