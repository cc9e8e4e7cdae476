// spec.training.precision acts on a device-memory backend, seen from outside the worker (issue 26): a real
// `torus run` of a 2-rank `gang.device: gpu` job in bf16 and in fp16, whose ranks are torus-worker's own main with the
// backend factory replaced by the pretend device (torus-worker-pretend-device, picked through TORUS_WORKER_BINARY).
// The dtype is read from what each rank's trainer exported, torus_worker_run_info{precision, activations, backend}
// on its metrics port, not from the job file. And the real torus-worker still refuses half precision on the CPU
// engine, naming the field.
#include <gtest/gtest.h>
#include <signal.h>

#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>

#include "tests/metrics/prometheus_fixture.h"
#include "tests/support/eventually.h"
#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"
#include "tests/support/torus_cli.h"

namespace torus {
namespace {

namespace fs = std::filesystem;
using test::RunOutput;
using Labels = std::map<std::string, std::string>;

constexpr int kHoldAfterStep = 2;  // of 8 (512 images in global batches of 64): rank 1 is held there

// 2 ranks of a narrow ResNet-9 on 28x28 synthetic images, one epoch; checkpoints in `dir` (a fresh one per run: a
// default folder could hold a finished run's checkpoint, and the run would resume past the hold). The collectives'
// deadline bounds how long a rank held by a failed test keeps its peer waiting.
fs::path write_job(const fs::path& dir, const std::string& name, const std::string& device,
                   const std::string& precision) {
  const fs::path file = dir / (name + ".yaml");
  std::ofstream(file) << "apiVersion: torus.dev/v1alpha1\nkind: TrainingJob\nmetadata: {name: " << name
                      << "}\nspec:\n"
                         "  gang: {workers: 2, device: "
                      << device
                      << "}\n"
                         "  model: {arch: resnet9, widths: [8, 16, 32, 64]}\n"
                         "  data:\n"
                         "    dataset: synthetic\n"
                         "    imageSize: 28\n"
                         "    loaderThreads: 1\n"
                         "    synthetic: {trainImages: 512, validationImages: 64, numClasses: 4}\n"
                         "  training:\n"
                         "    epochs: 1\n"
                         "    batchSize: 64\n"
                         "    precision: "
                      << precision
                      << "\n"
                         "    lrSchedule: {peak: 0.1}\n"
                         "    checkpoint: {dir: "
                      << (dir / "ckpt").string()
                      << "}\n"
                         "  allReduce: {timeoutSeconds: 60}\n";
  return file;
}

// The labels of torus_worker_run_info as the rank on `port` serves them (empty when it serves none).
Labels run_info(uint16_t port) {
  const std::string body = metrics::testing::http_get("127.0.0.1", port, "/metrics").body;
  std::smatch line;
  if (!std::regex_search(body, line, std::regex("\ntorus_worker_run_info\\{([^}]*)\\} 1"))) return {};
  Labels labels;
  const std::string inside = line[1];
  const std::regex pair("([a-z_]+)=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(inside.begin(), inside.end(), pair); it != std::sregex_iterator(); ++it)
    labels[(*it)[1]] = (*it)[2];
  return labels;
}

// The state letter of /proc/PID/stat ('T' stopped by a signal), or 0 when the process is gone.
char state_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const auto paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? 0 : stat[paren + 2];
}

bool wait_for_state(pid_t pid, char state) {
  return test::eventually([&] { return state_of(pid) == state; }, std::chrono::seconds(60),
                          std::chrono::milliseconds(10));
}

// What the test learns from `torus run`'s lines: its pid and the ranks' metrics ports ("rank N metrics: URL").
struct Announced {
  std::mutex mu;
  pid_t torus = 0;
  std::map<int, uint16_t> ports;
  void on_line(pid_t torus_pid, const std::string& line) {
    static const std::regex metrics("^rank ([0-9]+) metrics: http://127\\.0\\.0\\.1:([0-9]+)/metrics");
    std::smatch m;
    std::lock_guard lock(mu);
    torus = torus_pid;
    if (std::regex_search(line, m, metrics)) ports[std::stoi(m[1])] = static_cast<uint16_t>(std::stoi(m[2]));
  }
  std::optional<std::pair<pid_t, std::array<uint16_t, 2>>> both() {
    std::lock_guard lock(mu);
    if (torus == 0 || ports.size() < 2) return std::nullopt;
    return std::pair{torus, std::array{ports.at(0), ports.at(1)}};
  }
};

// Reads both ranks' run info while they are alive, whatever the machine's speed: rank 1 stops itself after step
// kHoldAfterStep (TORUS_TEST_SIGSTOP_AT_STEP), so rank 0 waits for it in the next collective and is scraped; then
// rank 0 is stopped, rank 1 continued (it now waits for rank 0) and scraped, and rank 0 continued. Every rank it
// stopped is continued on every path out, so a failed read never leaves the run hanging.
std::array<Labels, 2> read_run_info_of_held_ranks(Announced& announced) {
  std::array<Labels, 2> info;
  std::optional<std::pair<pid_t, std::array<uint16_t, 2>>> found;
  if (!test::eventually([&] { return (found = announced.both()).has_value(); }, std::chrono::seconds(90),
                        std::chrono::milliseconds(10))) {
    ADD_FAILURE() << "torus did not announce both ranks' metrics ports";
    return info;
  }
  const auto [torus_pid, ports] = *found;
  std::array<pid_t, 2> pid{};
  for (int r = 0; r < 2; ++r) {
    if (!test::eventually(
            [&] {
              const auto p = test::worker_pid(torus_pid, r);
              pid[r] = p.value_or(0);
              return p.has_value();
            },
            std::chrono::seconds(10), std::chrono::milliseconds(10))) {
      ADD_FAILURE() << "no process of rank " << r << " under torus " << torus_pid;
      return info;
    }
  }
  struct ContinueOnExit {
    std::array<pid_t, 2> pid;
    ~ContinueOnExit() {
      for (const pid_t p : pid) ::kill(p, SIGCONT);
    }
  } continue_on_exit{pid};
  if (!wait_for_state(pid[1], 'T')) {
    ADD_FAILURE() << "rank 1 did not stop itself after step " << kHoldAfterStep;
    return info;
  }
  info[0] = run_info(ports[0]);
  ::kill(pid[0], SIGSTOP);
  if (!wait_for_state(pid[0], 'T')) {
    ADD_FAILURE() << "rank 0 did not stop";
    return info;
  }
  ::kill(pid[1], SIGCONT);
  info[1] = run_info(ports[1]);
  return info;
}

TEST(PretendDeviceRun, HalfPrecisionJobsTrainInTheirDtypeOnBothRanksAsTheTrainerExports) {
  for (const auto& [precision, dtype] : {std::pair{"bf16", "bf16"}, {"fp16", "f16"}}) {
    SCOPED_TRACE(precision);
    const test::TempDir tmp(std::string("pretend-device-") + precision);
    const std::string name = std::string("pretend-") + precision;
    Announced announced;
    std::array<Labels, 2> info;
    std::thread reader([&] { info = read_run_info_of_held_ranks(announced); });
    const RunOutput out =
        test::run_torus({"run", write_job(tmp.path(), name, "gpu", precision).string()}, std::chrono::seconds(180),
                        [&](pid_t torus_pid, const std::string& line) { announced.on_line(torus_pid, line); },
                        {{"TORUS_WORKER_BINARY", PRETEND_DEVICE_WORKER},
                         {"TORUS_TEST_SIGSTOP_AT_STEP", "1:" + std::to_string(kHoldAfterStep)}});
    reader.join();
    ASSERT_EQ(out.exit_code, 0) << out.text();
    EXPECT_EQ(out.field("phase"), "Succeeded") << out.result_line();
    for (int r = 0; r < 2; ++r) {
      // The trainer's plan and its model's activation dtype, on the backend the factory made.
      EXPECT_EQ(info[r]["rank"], std::to_string(r));
      EXPECT_EQ(info[r]["precision"], precision) << "rank " << r;
      EXPECT_EQ(info[r]["activations"], dtype) << "rank " << r;
      EXPECT_EQ(info[r]["backend"], "pretend-device-recording") << "rank " << r;
      EXPECT_NE(info[r]["algorithm"], "nccl") << "the pretend device's gradients take the host reducer";
    }
    // Rank 0's effective configuration, as the trainer and the backend describe themselves.
    const std::string text = out.text();
    EXPECT_NE(text.find("precision: " + std::string(precision) + " (activations " + dtype), std::string::npos) << text;
    EXPECT_NE(text.find("engine: pretend-device-recording, device memory"), std::string::npos) << text;
    EXPECT_NE(text.find("worker " + std::string(PRETEND_DEVICE_WORKER)), std::string::npos)
        << "torus run names the worker it starts:\n"
        << text;
  }
}

// The real torus-worker, given a CPU job in half precision directly (no `torus run` in front of it), refuses it
// before training, naming the field; `torus run` refuses it too (Conformance.BadCombinationsAreRefusedBefore...),
// and a trainer past validation on the CPU engine refuses it as well (WorkerMain.TheCpuEngineRefuses...).
TEST(PretendDeviceRun, TheRealWorkerRefusesHalfPrecisionOnTheCpuEngineNamingTheField) {
  const test::TempDir tmp("pretend-device-cpu");
  for (const char* precision : {"bf16", "fp16"}) {
    const fs::path job = write_job(tmp.path(), std::string("cpu-") + precision, "cpu", precision);
    const test::ShellResult r = test::run_shell(std::string(TORUS_WORKER) + " --job " + job.string());
    EXPECT_NE(r.exit_code, 0) << precision << ":\n" << r.output;
    EXPECT_NE(r.output.find("spec.training.precision: the CPU engine trains in fp32 (it has no " +
                            std::string(precision) + " path)"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("effective configuration"), std::string::npos) << "it trained:\n" << r.output;
  }
}

}  // namespace
}  // namespace torus
