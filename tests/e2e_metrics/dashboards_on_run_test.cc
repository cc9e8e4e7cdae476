// The Grafana dashboards against a real local job: `torus run` trains Fashion-MNIST with two worker processes while
// a real Prometheus scrapes each rank's /metrics every second; every panel query of the worker dashboards runs
// through Prometheus's HTTP API with the template variables filled in, and each must return data. The run has far
// more epochs than that takes: the test waits for the data while the ranks train, then stops the run (Ctrl-C).
//
// The operator-health dashboard is left out: a local run has no operator (its panels are covered by
// tests/metrics/dashboards_test.cc against a scraped OperatorMetrics).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/process/supervisor.h"
#include "tests/metrics/prometheus_fixture.h"
#include "tests/support/eventually.h"
#include "tests/support/temp_dir.h"

namespace torus {
namespace {

namespace fs = std::filesystem;
namespace prom = metrics::testing;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const std::string kTorus = std::string(TORUS_BINARY_DIR) + "/bin/torus";
const std::string kExample = std::string(TORUS_SOURCE_DIR) + "/examples/fashion-mnist.yaml";
constexpr int kWorkers = 2;
// The dashboard a local run cannot feed: its metrics come from `torus operator`.
constexpr const char* kOperatorDashboard = "torus-operator.json";

// `torus run` as a child process whose output is pumped on a thread of its own (so the pipes never fill while the
// test talks to Prometheus); the test waits for output lines or the exit with deadlines.
class BackgroundRun {
 public:
  explicit BackgroundRun(std::vector<std::string> args)
      : supervisor_([this](size_t, process::Stream, std::string_view line) { on_line(line); }) {
    supervisor_.set_wakeup_fd(stop_fd_);
    args.insert(args.begin(), kTorus);
    pid_ = supervisor_.pid(supervisor_.start(process::ProcessSpec{"torus", args, {{"TORUS_LOG_LEVEL", "info"}}}));
    pump_ = std::thread([this] { pump(); });
  }

  ~BackgroundRun() {
    const uint64_t one = 1;
    if (::write(stop_fd_, &one, sizeof(one)) != sizeof(one)) std::perror("eventfd write");
    pump_.join();
    supervisor_.stop_all(5s);
    ::close(stop_fd_);
  }
  BackgroundRun(const BackgroundRun&) = delete;
  BackgroundRun& operator=(const BackgroundRun&) = delete;

  // Waits until every rank announced its metrics port; returns rank -> port (fewer when the deadline passes or
  // torus ends first).
  std::map<int, uint16_t> wait_for_metrics_ports(int ranks, Clock::time_point deadline) {
    std::unique_lock lock(mu_);
    changed_.wait_until(lock, deadline, [&] { return static_cast<int>(ports_.size()) >= ranks || exit_; });
    return ports_;
  }

  std::optional<process::Termination> wait_for_exit(Clock::time_point deadline) {
    std::unique_lock lock(mu_);
    changed_.wait_until(lock, deadline, [&] { return exit_.has_value(); });
    return exit_;
  }

  void interrupt() const { ::kill(pid_, SIGINT); }

  std::string output() const {
    std::lock_guard lock(mu_);
    std::string all;
    for (const auto& line : lines_) all += line + "\n";
    return all;
  }

 private:
  void on_line(std::string_view text) {
    // torus prints "rank N metrics: http://127.0.0.1:PORT/metrics" when a rank's exporter is up.
    static const std::regex kPortLine(R"(rank (\d+) metrics: http://127\.0\.0\.1:(\d+)/metrics)");
    std::lock_guard lock(mu_);
    lines_.emplace_back(text);
    std::smatch m;
    if (std::regex_search(lines_.back(), m, kPortLine)) {
      ports_[std::stoi(m[1])] = static_cast<uint16_t>(std::stoi(m[2]));
      changed_.notify_all();
    }
  }

  void pump() {
    for (;;) {
      // Returns early on an exit or when the destructor writes stop_fd_.
      auto ended = supervisor_.wait_any(std::chrono::hours(1));
      std::lock_guard lock(mu_);
      if (ended) {
        exit_ = ended;
        changed_.notify_all();
        return;
      }
      if (stop_requested()) return;
    }
  }

  bool stop_requested() const {
    pollfd p{stop_fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  }

  int stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::string> lines_;
  std::map<int, uint16_t> ports_;
  std::optional<process::Termination> exit_;
  process::Supervisor supervisor_;
  pid_t pid_ = 0;
  std::thread pump_;
};

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// True when some series of a query_range result has a finite sample (NaN and Inf are what Grafana shows as gaps).
bool has_finite_sample(const json& result) {
  for (const auto& series : result) {
    for (const auto& point : series.value("values", json::array())) {
      const double v = std::stod(point[1].get<std::string>());
      if (std::isfinite(v)) return true;
    }
  }
  return false;
}

// /api/v1/query_range over [start, end]: what Grafana asks for a time series panel over the run.
json query_range(const prom::PrometheusServer& prometheus, const std::string& expr, double start, double end) {
  const std::string target = "/api/v1/query_range?query=" + prom::url_encode(expr) + "&start=" + std::to_string(start) +
                             "&end=" + std::to_string(end) + "&step=1";
  const prom::HttpReply reply = prom::http_get("127.0.0.1", prometheus.port(), target, 30s);
  if (reply.status != 200) return json{{"error", reply.body}};
  return json::parse(reply.body)["data"]["result"];
}

// The job's own label values, as the dashboards' variables would list them.
std::map<std::string, std::string> variables_of(const json& series) {
  const json& labels = series["metric"];
  return {{"datasource", "prometheus"},
          {"namespace", labels.value("namespace", "")},
          {"job", labels.value("job", "")},
          {"attempt", ".*"}};  // "All", as the dashboards default (multi-valued, includeAll)
}

// The worker dashboards' panel queries, each with its variables filled in.
struct FilledQuery {
  std::string name;  // dashboard / panel / ref, for the failure message
  std::string expr;
};
std::vector<FilledQuery> worker_panel_queries(const std::map<std::string, std::string>& values) {
  std::vector<FilledQuery> out;
  for (const auto& file : prom::dashboard_files(TORUS_SOURCE_DIR)) {
    if (file.filename() == kOperatorDashboard) continue;  // no operator in a local run (see the top of the file)
    for (const auto& q : prom::dashboard_queries(file)) {
      out.push_back({q.dashboard + " / panel " + std::to_string(q.panel_id) + " '" + q.panel_title + "' " + q.ref_id,
                     prom::substitute_variables(q.expr, values)});
    }
  }
  return out;
}

// The queries that return no finite sample over [start, end] (each with why), as Grafana would show them empty.
std::vector<std::string> empty_panels(const prom::PrometheusServer& prometheus, const std::vector<FilledQuery>& queries,
                                      double start, double end) {
  std::vector<std::string> empty;
  for (const auto& q : queries) {
    const json result = query_range(prometheus, q.expr, start, end);
    if (result.is_object()) {
      empty.push_back(q.name + ": query failed: " + result["error"].get<std::string>() + "\n      " + q.expr);
    } else if (!has_finite_sample(result)) {
      empty.push_back(q.name + ":\n      " + q.expr);
    }
  }
  return empty;
}

TEST(DashboardsOnARun, EveryWorkerPanelHasDataFromARealTorusRun) {
  const test::TempDir dir("torus-e2e-metrics-dashboards");  // outlives the run, which writes into it
  const double run_start = unix_now();
  // Checkpoints during the epoch too (every 60 of its 235 steps). Far more epochs than the test waits for (one lasts
  // about 5 s on 2 ranks here): the rate() panels need a few 1 s scrapes and the validation panels an epoch's end,
  // and a run that ended by itself first (on a faster machine) would leave them empty. The test stops it.
  BackgroundRun run({"run", kExample, "--workers", std::to_string(kWorkers), "--set", "spec.training.epochs=1000",
                     "--set", "spec.training.checkpoint.everySteps=60", "--set",
                     "spec.training.checkpoint.dir=" + (dir.path() / "ckpt").string()});

  const auto ports = run.wait_for_metrics_ports(kWorkers, Clock::now() + 120s);
  ASSERT_EQ(static_cast<int>(ports.size()), kWorkers) << "not every rank announced its metrics port:\n" << run.output();
  prom::PrometheusOptions options;
  for (const auto& [rank, port] : ports) options.targets.push_back("127.0.0.1:" + std::to_string(port));
  options.scrape_interval = "1s";
  prom::PrometheusServer prometheus(options);

  // Both ranks scraped, and taking steps.
  const json stepping =
      prometheus.wait_for_series("count(torus_worker_steps_total > 0) == " + std::to_string(kWorkers), 180s);
  ASSERT_FALSE(stepping.empty()) << "no scraped steps from every rank within 180 s\n"
                                 << run.output() << "\nprometheus log:\n"
                                 << prometheus.recent_log();
  const json any_series = prometheus.query("torus_worker_steps_total");
  ASSERT_FALSE(any_series.empty());
  std::map<std::string, std::string> values = variables_of(any_series[0]);

  // Every panel has data over the run so far, while the ranks still train (an epoch's end included).
  std::vector<FilledQuery> queries;
  std::vector<std::string> empty;
  test::eventually(
      [&] {
        const double now = unix_now();
        values["__range"] = std::to_string(static_cast<int>(now - run_start) + 1) + "s";
        queries = worker_panel_queries(values);
        empty = empty_panels(prometheus, queries, run_start, now);
        return empty.empty() || run.wait_for_exit(Clock::now()).has_value();
      },
      600s, 1s);  // polled once a scrape interval: Prometheus has nothing new sooner
  const bool ended_by_itself = run.wait_for_exit(Clock::now()).has_value();

  // The user stops the run: Ctrl-C, and it ends Suspended.
  run.interrupt();
  const auto exit = run.wait_for_exit(Clock::now() + 120s);
  ASSERT_TRUE(exit.has_value()) << "torus run did not stop within 120 s of Ctrl-C\n" << run.output();
  EXPECT_FALSE(ended_by_itself) << exit->describe() << "\n" << run.output();
  EXPECT_EQ(exit->shell_code(), 130) << exit->describe() << "\n" << run.output();

  EXPECT_GT(queries.size(), 30u) << "the worker dashboards lost their panels?";
  std::string names;
  for (const auto& e : empty) names += "\n  " + e;
  EXPECT_TRUE(empty.empty()) << empty.size() << " of " << queries.size()
                             << " panel queries returned no data over the run (job=" << values["job"]
                             << ", namespace=" << values["namespace"] << "):" << names;
}

}  // namespace
}  // namespace torus
