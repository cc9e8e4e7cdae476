#pragma once
// Tiny synthetic TrainingJobs run through the real `torus` and `torus-worker` binaries, and what they leave behind
// for the conformance tests to read: the summary and its RESULT line, the checkpoint files and the parameters in
// them, the per-rank logs, the epoch table's evaluation figures.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/torus_cli.h"
#include "worker/checkpoint/checkpoint.h"

namespace torus::conformance {

namespace fs = std::filesystem;
using std::chrono::seconds;
using test::run_torus;
using test::RunOutput;

// 2 ranks of a ResNet-9 a few thousand parameters wide on 8x8 synthetic images: a few seconds on 2 cores.
// `extra` is appended under `spec:` (two-space indented YAML), `training_extra` under `spec.training:`.
inline fs::path write_job(const fs::path& dir, const std::string& name, const std::string& extra,
                          const std::string& training_extra = "") {
  const fs::path file = dir / (name + ".yaml");
  std::ofstream(file) << "apiVersion: torus.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: " << name
                      << "}\nspec:\n"
                         "  gang: {workers: 2, threadsPerProcess: 1}\n"
                         "  model: {arch: resnet9, widths: [8, 8, 16, 16]}\n"
                         "  data:\n"
                         "    dataset: synthetic\n"
                         "    imageSize: 8\n"
                         "    loaderThreads: 1\n"
                         "    synthetic: {trainImages: 64, validationImages: 32, numClasses: 4}\n"
                         "  training:\n"
                         "    epochs: 1\n"
                         "    batchSize: 16\n"
                         "    lrSchedule: {peak: 0.1}\n"
                      << training_extra << extra;
  return file;
}

// `torus run JOB --set S...`, bounded.
inline RunOutput run(const fs::path& job, std::vector<std::string> sets = {}) {
  std::vector<std::string> args = {"run", job.string()};
  for (auto& s : sets) {
    args.push_back("--set");
    args.push_back(std::move(s));
  }
  return run_torus(args, seconds(180));
}

inline bool has(const RunOutput& out, const std::string& text) { return out.text().find(text) != std::string::npos; }

// The checkpoints a run wrote under `dir` (in whatever run folder below it), by step: ckpt-STEP.torus.
inline std::map<int64_t, fs::path> checkpoints_under(const fs::path& dir) {
  std::map<int64_t, fs::path> out;
  if (!fs::exists(dir)) return out;
  static const std::regex kName(R"(ckpt-([0-9]+)\.torus)");
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, m, kName)) out[std::stoll(m[1])] = entry.path();
  }
  return out;
}

// The steps of those checkpoints, in order.
inline std::vector<int64_t> checkpoint_steps(const fs::path& dir) {
  std::vector<int64_t> steps;
  for (const auto& [step, path] : checkpoints_under(dir)) steps.push_back(step);
  return steps;
}

// The model's parameters as a checkpoint holds them (its "params" section: every weight, fp32).
inline std::vector<float> params_of(const fs::path& checkpoint) {
  const worker::checkpoint::CheckpointReader reader(checkpoint.string());
  const auto bytes = reader.section("params");
  std::vector<float> params(bytes.size() / sizeof(float));
  std::memcpy(params.data(), bytes.data(), params.size() * sizeof(float));
  return params;
}

// A run that keeps a checkpoint after every step, and what it left.
struct Trained {
  RunOutput out;
  std::map<int64_t, fs::path> checkpoints;
  // The parameters after the last step (empty, with the test failed, when there is no checkpoint).
  std::vector<float> final_params() const {
    if (checkpoints.empty()) {
      ADD_FAILURE() << "no checkpoint\n" << out.text();
      return {};
    }
    return params_of(checkpoints.rbegin()->second);
  }
};

// One rank, one epoch of 4 steps on the job above, a checkpoint after each step (all kept) in dir/NAME-ckpt, with
// `sets` applied (--set PATH=VALUE).
inline Trained train(const fs::path& dir, const std::string& name, std::vector<std::string> sets) {
  const fs::path ckpt = dir / (name + "-ckpt");
  sets.insert(sets.begin(), "spec.gang.workers=1");
  Trained t;
  t.out = run(write_job(dir, name, "", "    checkpoint: {dir: " + ckpt.string() + ", everySteps: 1, keep: 100}\n"),
              std::move(sets));
  EXPECT_EQ(t.out.exit_code, 0) << name << "\n" << t.out.text();
  t.checkpoints = checkpoints_under(ckpt);
  return t;
}

// The validation loss of the last epoch, from the summary's epoch table ("epoch  train loss  val loss  val acc ...").
inline double val_loss(const RunOutput& out) {
  static const std::regex kRow(R"(^ +[0-9]+ +([0-9.]+) +([0-9.]+) +[0-9.]+% )");
  double loss = -1;
  for (const auto& line : out.lines) {
    std::smatch m;
    if (std::regex_search(line, m, kRow)) loss = std::stod(m[2]);
  }
  return loss;
}

}  // namespace torus::conformance
