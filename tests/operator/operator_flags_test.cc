// `torus operator` flags: namespace lists (comma-separated, repeated, aliases), the Lease's namespace default, and
// errors that name the flag.
#include "operator/cli/operator_flags.h"

#include <gtest/gtest.h>

#include "common/util/error.h"

namespace torus::cli {
namespace {

using Namespaces = std::vector<std::string>;

Namespaces namespaces_of(const std::vector<std::string>& args) { return parse_operator_flags(args).namespaces; }

std::string error_of(const std::vector<std::string>& args) {
  try {
    parse_operator_flags(args);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(OperatorFlags, NoNamespaceMeansEveryNamespace) {
  EXPECT_TRUE(namespaces_of({}).empty());
  EXPECT_TRUE(namespaces_of({"--namespace", ""}).empty());
  EXPECT_TRUE(namespaces_of({"--watch-namespace="}).empty());
}

TEST(OperatorFlags, OneNamespace) {
  EXPECT_EQ(namespaces_of({"--namespace", "team-a"}), Namespaces{"team-a"});
  EXPECT_EQ(namespaces_of({"--watch-namespace=team-a"}), Namespaces{"team-a"});
}

TEST(OperatorFlags, CommaSeparatedList) {
  EXPECT_EQ(namespaces_of({"--namespace", "a,b"}), (Namespaces{"a", "b"}));
  EXPECT_EQ(namespaces_of({"--namespace=a, b ,c"}), (Namespaces{"a", "b", "c"}));
  EXPECT_EQ(namespaces_of({"--watch-namespace", "b,a"}), (Namespaces{"b", "a"}));
}

TEST(OperatorFlags, RepeatedFlagsAndAliasesAccumulateInOrderOnce) {
  EXPECT_EQ(namespaces_of({"--watch-namespace", "a", "--watch-namespace", "b"}), (Namespaces{"a", "b"}));
  // The Helm chart's form: one --watch-namespace=NS per listed namespace.
  EXPECT_EQ(namespaces_of({"--watch-namespace=a", "--watch-namespace=b", "--watch-namespace=c"}),
            (Namespaces{"a", "b", "c"}));
  EXPECT_EQ(namespaces_of({"--namespace", "a,b", "--watch-namespace=c", "--namespace", "b"}),
            (Namespaces{"a", "b", "c"}));
  EXPECT_EQ(namespaces_of({"--namespace", "a,a"}), Namespaces{"a"});
}

TEST(OperatorFlags, BadNamespacesNameTheFlag) {
  EXPECT_EQ(error_of({"--namespace", "a,,b"}), "--namespace: an empty namespace in 'a,,b'");
  EXPECT_EQ(error_of({"--watch-namespace=a,"}), "--watch-namespace: an empty namespace in 'a,'");
  EXPECT_EQ(error_of({"--namespace", "Team_A"}), "--namespace: 'Team_A' is not a namespace name (a DNS-1123 label)");
  EXPECT_EQ(error_of({"--watch-namespace"}), "--watch-namespace: expected a value");
}

TEST(OperatorFlags, LeaseNamespaceDefaultsAsBefore) {
  EXPECT_EQ(lease_namespace_of(parse_operator_flags({}), ""), "default");
  EXPECT_EQ(lease_namespace_of(parse_operator_flags({}), "torus-system"), "torus-system");
  EXPECT_EQ(lease_namespace_of(parse_operator_flags({"--namespace", "a"}), "torus-system"), "a");
  EXPECT_EQ(lease_namespace_of(parse_operator_flags({"--namespace", "b,a"}), "torus-system"), "b");
  EXPECT_EQ(lease_namespace_of(parse_operator_flags({"--namespace", "a,b", "--lease-namespace", "ops"}), ""), "ops");
  EXPECT_EQ(lease_namespace_of(parse_operator_flags({"--leader-election-namespace=ops", "--watch-namespace=a"}), ""),
            "ops");
}

TEST(OperatorFlags, OtherFlagsKeepTheirForms) {
  const OperatorFlags f = parse_operator_flags(
      {"--kubeconfig", "/k", "--leader-elect", "--metrics-address=:9000", "--qps", "50", "--burst=60", "--workers", "8",
       "--id", "r1", "--worker-image=img:1", "--lease-duration", "3", "--retry-period=0.5", "--progress-interval=2"});
  EXPECT_EQ(f.kubeconfig, "/k");
  EXPECT_EQ(f.leader_elect, OperatorFlags::LeaderElect::kOn);
  EXPECT_EQ(f.metrics_addr, ":9000");
  EXPECT_EQ(f.qps, 50);
  EXPECT_EQ(f.burst, 60);
  EXPECT_EQ(f.workers, 8);
  EXPECT_EQ(f.identity, "r1");
  EXPECT_EQ(f.worker_image, "img:1");
  EXPECT_EQ(f.lease.lease_duration, std::chrono::milliseconds(3000));
  EXPECT_EQ(f.lease.retry_period, std::chrono::milliseconds(500));
  EXPECT_EQ(f.progress_interval, std::chrono::seconds(2));
  EXPECT_EQ(error_of({"--qps", "-1"}), "--qps: must be a number >= 0 (0: no client-side limit), got '-1'");
  EXPECT_EQ(error_of({"--bogus"}), "torus operator: unknown flag '--bogus' (see torus operator --help)");
}

// As controller-runtime's clients since 2025: no client-side limit unless asked for (the server's APF protects it).
TEST(OperatorFlags, NoClientRateLimitByDefault) {
  EXPECT_EQ(parse_operator_flags({}).qps, 0);
  EXPECT_EQ(parse_operator_flags({}).burst, 0);
  EXPECT_EQ(parse_operator_flags({"--qps", "0"}).qps, 0);
  EXPECT_EQ(parse_operator_flags({"--qps", "20", "--burst", "30"}).qps, 20);
}

TEST(OperatorFlags, ProgressInterval) {
  EXPECT_EQ(parse_operator_flags({}).progress_interval, std::chrono::seconds(15));
  EXPECT_EQ(parse_operator_flags({"--progress-interval", "2"}).progress_interval, std::chrono::seconds(2));
  EXPECT_EQ(parse_operator_flags({"--progress-interval=30"}).progress_interval, std::chrono::seconds(30));
  EXPECT_EQ(error_of({"--progress-interval", "0.5"}),
            "--progress-interval: must be a whole number of seconds >= 1, got '0.5'");
  EXPECT_EQ(error_of({"--progress-interval", "-3"}), "--progress-interval: must be a positive number, got '-3'");
}

}  // namespace
}  // namespace torus::cli
