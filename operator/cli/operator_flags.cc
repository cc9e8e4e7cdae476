#include "operator/cli/operator_flags.h"

#include <algorithm>
#include <optional>
#include <regex>

#include "common/util/error.h"

namespace torus::cli {
namespace {

double number_flag(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(v > 0)) {
    throw InvalidArgument(flag + ": must be a positive number, got '" + value + "'");
  }
  return v;
}

// A client rate flag: a number >= 0, where 0 means no client-side limit.
double rate_flag(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(v >= 0)) {
    throw InvalidArgument(flag + ": must be a number >= 0 (0: no client-side limit), got '" + value + "'");
  }
  return v;
}

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

bool is_dns1123_label(const std::string& s) {
  static const std::regex kLabel("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
  return s.size() <= 63 && std::regex_match(s, kLabel);
}

}  // namespace

std::vector<std::string> parse_namespace_list(const std::string& flag, const std::string& value) {
  std::vector<std::string> out;
  if (trim(value).empty()) return out;
  size_t start = 0;
  for (;;) {
    const size_t comma = value.find(',', start);
    const std::string item = trim(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty()) throw InvalidArgument(flag + ": an empty namespace in '" + value + "'");
    if (!is_dns1123_label(item)) {
      throw InvalidArgument(flag + ": '" + item + "' is not a namespace name (a DNS-1123 label)");
    }
    out.push_back(item);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

OperatorFlags parse_operator_flags(const std::vector<std::string>& args) {
  OperatorFlags f;
  for (size_t i = 0; i < args.size(); ++i) {
    // Both "--flag value" and "--flag=value" (the Helm chart's form); the chart's long names are aliases.
    std::string a = args[i];
    std::optional<std::string> inline_value;
    if (const auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    if (a == "--metrics-address") a = "--metrics-addr";
    if (a == "--leader-election-namespace") a = "--lease-namespace";
    const std::string given = a;  // named in errors as the user wrote it
    if (a == "--watch-namespace") a = "--namespace";
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) throw InvalidArgument(given + ": expected a value");
      return args[++i];
    };
    if (a == "--kubeconfig") {
      f.kubeconfig = value();
    } else if (a == "--namespace") {
      for (auto& ns : parse_namespace_list(given, value())) {
        if (std::find(f.namespaces.begin(), f.namespaces.end(), ns) == f.namespaces.end()) f.namespaces.push_back(ns);
      }
    } else if (a == "--lease-namespace") {
      f.lease_namespace = value();
    } else if (a == "--id") {
      f.identity = value();
    } else if (a == "--leader-elect") {
      f.leader_elect = OperatorFlags::LeaderElect::kOn;
    } else if (a == "--metrics-addr") {
      f.metrics_addr = value();
    } else if (a == "--qps") {
      f.qps = rate_flag(a, value());
    } else if (a == "--burst") {
      f.burst = static_cast<int>(rate_flag(a, value()));
    } else if (a == "--lease-duration") {
      f.lease.lease_duration = std::chrono::milliseconds(static_cast<int64_t>(number_flag(a, value()) * 1000));
    } else if (a == "--renew-deadline") {
      f.lease.renew_deadline = std::chrono::milliseconds(static_cast<int64_t>(number_flag(a, value()) * 1000));
    } else if (a == "--retry-period") {
      f.lease.retry_period = std::chrono::milliseconds(static_cast<int64_t>(number_flag(a, value()) * 1000));
    } else if (a == "--workers") {
      f.workers = static_cast<int>(number_flag(a, value()));
    } else if (a == "--progress-interval") {
      const std::string text = value();
      const double seconds = number_flag(a, text);
      if (seconds < 1 || seconds != static_cast<double>(static_cast<int64_t>(seconds)))
        throw InvalidArgument(given + ": must be a whole number of seconds >= 1, got '" + text + "'");
      f.progress_interval = std::chrono::seconds(static_cast<int64_t>(seconds));
    } else if (a == "--worker-image") {
      f.worker_image = value();
    } else {
      throw InvalidArgument("torus operator: unknown flag '" + a + "' (see torus operator --help)");
    }
  }
  return f;
}

std::string lease_namespace_of(const OperatorFlags& flags, const std::string& current) {
  if (!flags.lease_namespace.empty()) return flags.lease_namespace;
  if (!flags.namespaces.empty()) return flags.namespaces.front();
  if (!current.empty()) return current;
  return "default";
}

}  // namespace torus::cli
