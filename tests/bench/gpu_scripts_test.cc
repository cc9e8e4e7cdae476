// The GPU scripts' jobs pass validation here, on the CPU: bench/gpu/fashion_mnist.sh, bench/gpu/gpu.sh and
// scripts/gpu-check.sh each print, with --print-jobs, the arguments of every `torus run` they would start (from the
// one function that builds them for the real runs), and each goes through the real torus binary's validation. A GPU
// window is rare and short: a job that a validation change refuses must fail here, not there.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"

namespace torus::test {
namespace {

const std::string kRoot = TORUS_SOURCE_DIR;
const std::string kTorus = std::string(TORUS_BINARY_DIR) + "/bin/torus";

// The jobs `script --print-jobs DIR` prints: one line each, `torus run`'s arguments shell-quoted.
std::vector<std::string> jobs_of(const std::string& script, const TempDir& dir) {
  const ShellResult r = run_shell("'" + kRoot + "/" + script + "' --print-jobs '" + dir.file("jobs") + "'");
  EXPECT_EQ(r.exit_code, 0) << script << " --print-jobs:\n" << r.output;
  std::vector<std::string> jobs;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) jobs.push_back(line);
  return jobs;
}

// `torus run ARGS... EXTRA` with the job suspended: torus reads the file, applies every --set, defaults and validates
// the job as for a real run (every error, nothing started), then, the job being valid and suspended, starts nothing.
ShellResult dry_run(const std::string& args, const std::string& extra, const TempDir& dir) {
  const std::string args_file = dir.write("args", args);
  return run_shell("bash -c 'eval \"args=($(<\"$1\"))\"; exec \"$0\" run \"${args[@]}\" " + extra +
                   " --set spec.runPolicy.suspend=true' '" + kTorus + "' '" + args_file + "'");
}

void expect_every_job_valid(const std::string& script) {
  TempDir dir("gpu-scripts");
  const std::vector<std::string> jobs = jobs_of(script, dir);
  ASSERT_FALSE(jobs.empty()) << script << " --print-jobs printed no job";
  for (const std::string& job : jobs) {
    const ShellResult r = dry_run(job, "", dir);
    EXPECT_EQ(r.exit_code, 0) << script << " runs a job that torus refuses:\n  torus run " << job << "\n" << r.output;
    EXPECT_NE(r.output.find("RESULT phase=Suspended"), std::string::npos) << r.output;
  }
}

TEST(GpuScripts, FashionMnistTimeToTargetRunsAValidJob) { expect_every_job_valid("bench/gpu/fashion_mnist.sh"); }

TEST(GpuScripts, ResNet50BenchRunsValidJobs) { expect_every_job_valid("bench/gpu/gpu.sh"); }

// gpu-check's own runs: one and two GPU workers on Fashion-MNIST and on synthetic images, and Page's ResNet-9.
TEST(GpuScripts, GpuCheckRunsValidJobsForEveryDataAndGpuCount) {
  TempDir dir("gpu-scripts");
  EXPECT_EQ(jobs_of("scripts/gpu-check.sh", dir).size(), 5u);
  expect_every_job_valid("scripts/gpu-check.sh");
}

// The suspended run is a real validation, not a short cut past it: the same job with a field a GPU rank refuses (the
// CPU engine's threads, which examples/fashion-mnist.yaml sets for its CPU workers) fails, naming the field.
TEST(GpuScripts, TheDryRunRefusesWhatAGpuRankRefuses) {
  TempDir dir("gpu-scripts");
  const std::vector<std::string> jobs = jobs_of("bench/gpu/fashion_mnist.sh", dir);
  ASSERT_EQ(jobs.size(), 1u);
  const ShellResult r = dry_run(jobs[0], "--set spec.gang.threadsPerProcess=1", dir);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("spec.gang.threadsPerProcess: sets the CPU engine's math threads"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("RESULT phase=Suspended"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace torus::test
