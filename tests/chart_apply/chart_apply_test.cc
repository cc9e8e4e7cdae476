// Drives chart_apply_test.py: charts/torus-operator rendered with the official Helm library (Python bindings only),
// installed on the API stand-in (kube-standin) with the real kubectl, and read back with `kubectl get`. One test per
// value set, each with its own stand-in; with a namespace list the real `torus operator` runs with the rendered args.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/shell.h"

namespace {

constexpr int kDeadlineSeconds = 240;  // the script's own kubectl calls have deadlines too

::torus::test::ShellResult run_script(const std::string& test_class) {
  return ::torus::test::run_shell("timeout " + std::to_string(kDeadlineSeconds) + " /usr/bin/python3 " +
                                  std::string(TORUS_SOURCE_DIR) + "/tests/chart_apply/chart_apply_test.py --standin " +
                                  std::string(TORUS_BINARY_DIR) + "/bin/kube-standin --torus " +
                                  std::string(TORUS_BINARY_DIR) + "/bin/torus --kubectl " + TORUS_KUBECTL + " --helm " +
                                  TORUS_HELM + " " + test_class);
}

void expect_passes(const std::string& test_class) {
  const ::torus::test::ShellResult outcome = run_script(test_class);
  EXPECT_EQ(outcome.exit_code, 0) << (outcome.exit_code == 124 ? "past the deadline\n" : "") << outcome.output;
  EXPECT_NE(outcome.output.find("\nOK"), std::string::npos) << outcome.output;
}

TEST(ChartApply, DefaultValuesInstallOnTheStandin) { expect_passes("DefaultValues"); }

TEST(ChartApply, MonitoringAndNamespacedValuesInstallWithTheMonitoringCrds) {
  expect_passes("MonitoringAndNamespacedValues");
}

// The operator as the chart's ServiceAccount under the stand-in's RBAC: runs a job; a verb removed from the
// ClusterRole fails it with a 403 naming the verb.
TEST(ChartApply, TheOperatorRunsUnderTheChartsRbacAndAMissingVerbIsForbidden) { expect_passes("ChartRbacIsEnforced"); }

TEST(ChartApply, MinimalValuesInstallOnlyDeploymentAndService) { expect_passes("MinimalValues"); }

TEST(ChartApply, AKindTheStandinDoesNotServeFailsTheApply) { expect_passes("UnknownKindFailsLoudly"); }

TEST(ChartApply, HelmInstallsUpgradesAndUninstallsTheChart) { expect_passes("HelmCli"); }

// The operator runs as the chart's pod (operator_pod_test.py): `helm install` on kube-standin with the process
// kubelet, the operator with its in-cluster config (the projected service-account token) and so the chart's RBAC;
// a job applied with kubectl Succeeds, `helm upgrade` rolls the operator pod, `helm uninstall` leaves CRD and job.
TEST(ChartApply, TheOperatorRunsAsTheChartsPodAndRunsAJob) {
  const std::string bin = std::string(TORUS_BINARY_DIR) + "/bin/";
  const ::torus::test::ShellResult outcome = ::torus::test::run_shell(
      "timeout " + std::to_string(kDeadlineSeconds) + " /usr/bin/python3 " + std::string(TORUS_SOURCE_DIR) +
      "/tests/chart_apply/operator_pod_test.py --standin " + bin + "kube-standin --images " +
      std::string(TORUS_BINARY_DIR) + "/images/out --kubectl " + TORUS_KUBECTL + " --helm " + TORUS_HELM);
  EXPECT_EQ(outcome.exit_code, 0) << (outcome.exit_code == 124 ? "past the deadline\n" : "") << outcome.output;
  EXPECT_NE(outcome.output.find("\nOK"), std::string::npos) << outcome.output;
}

}  // namespace
