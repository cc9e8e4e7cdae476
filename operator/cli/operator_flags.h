#pragma once
// The command line of `torus operator`, parsed apart from running it (tests/operator/operator_flags_test.cc).
#include <chrono>
#include <string>
#include <vector>

#include "operator/kube/leader_election.h"

namespace torus::cli {

struct OperatorFlags {
  std::string kubeconfig;
  // Watched namespaces, in the order given, each once; empty = every namespace. From `--namespace a,b`,
  // `--namespace a --namespace b`, or the alias --watch-namespace, in any mix.
  std::vector<std::string> namespaces;
  std::string lease_namespace;
  std::string identity;
  enum class LeaderElect { kOff, kOn } leader_elect = LeaderElect::kOff;
  std::string metrics_addr = ":8080";
  // No client-side limit by default: the API server's Priority and Fairness protects it (docs/operator.md).
  double qps = 0;
  int burst = 0;
  int workers = 4;
  std::chrono::seconds progress_interval{15};  // how often a Running job's progress is read from rank 0
  std::string worker_image;
  kube::LeaderElectionOptions lease;
};

// Both "--flag value" and "--flag=value" (the Helm chart's form). Throws torus::InvalidArgument naming the flag.
OperatorFlags parse_operator_flags(const std::vector<std::string>& args);

// Splits a --namespace value ("a,b", " a , b"); "" is no namespace. Each must be a DNS-1123 label.
std::vector<std::string> parse_namespace_list(const std::string& flag, const std::string& value);

// The Lease's namespace: --lease-namespace, else the first watched namespace, else `current` (the pod's or the
// kubeconfig context's), else "default".
std::string lease_namespace_of(const OperatorFlags& flags, const std::string& current);

}  // namespace torus::cli
