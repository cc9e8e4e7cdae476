#include "operator/cli/run_command.h"

#include <cstdio>

#include "common/launch/exit_codes.h"
#include "operator/runtime/local_run.h"

namespace torus::cli {

int run_command(const std::vector<std::string>& args) {
  runtime::LocalRunOptions options;
  auto usage_error = [](const std::string& what) {
    std::fprintf(stderr, "torus run: %s\n\n%s", what.c_str(), kRunUsage);
    return to_int(launch::ExitCode::kUsage);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--workers" || a == "--set" || a == "--log-dir") {
      if (i + 1 >= args.size()) return usage_error(a + " needs a value");
      const std::string& v = args[++i];
      if (a == "--set") {
        options.sets.push_back(v);
        continue;
      }
      if (a == "--log-dir") {
        options.log_dir = v;
        continue;
      }
      try {
        size_t used = 0;
        options.workers = std::stoi(v, &used);
        if (used != v.size()) throw std::invalid_argument(v);
      } catch (const std::exception&) {
        return usage_error("--workers: expected an integer, got '" + v + "'");
      }
    } else if (a == "--resume") {
      options.resume = runtime::Resume::kLatest;
    } else if (a == "--verbose" || a == "-v") {
      options.verbosity = runtime::Verbosity::kAllRanks;
    } else if (!a.empty() && a[0] == '-') {
      return usage_error("unknown option " + a);
    } else if (options.job_file.empty()) {
      options.job_file = a;
    } else {
      return usage_error("one job file at a time (got " + options.job_file + " and " + a + ")");
    }
  }
  if (options.job_file.empty()) return usage_error("missing FILE");
  return runtime::run_local(options);
}

}  // namespace torus::cli
