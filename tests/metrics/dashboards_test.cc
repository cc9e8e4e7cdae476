// The Grafana dashboards in dashboards/: generated files up to date, structure a Grafana can load and every
// variable wired, and every panel's PromQL accepted by a real Prometheus (a parse error answers 400).
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "common/metrics/goodput_metrics.h"
#include "common/metrics/http_exporter.h"
#include "common/metrics/operator_metrics.h"
#include "common/metrics/worker_metrics.h"
#include "tests/metrics/prometheus_fixture.h"
#include "tests/metrics/sample_job.h"
#include "tests/support/temp_dir.h"

namespace torus::metrics {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = TORUS_SOURCE_DIR;

nlohmann::json load(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Grafana variable names an expression refers to ($x, ${x}, ${x:fmt}, [[x]]), built-ins ($__...) excluded.
std::set<std::string> referenced_variables(const std::string& text) {
  static const std::regex kVariable(
      R"(\$\{([A-Za-z0-9_]+)(?::[A-Za-z0-9_]+)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)\]\])");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kVariable); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    const std::string name = m[1].matched ? m[1].str() : m[2].matched ? m[2].str() : m[3].str();
    if (name.rfind("__", 0) != 0) names.insert(name);
  }
  return names;
}

const std::map<std::string, std::string> kVariableValues = {
    {"namespace", "team-a"}, {"job", "fashion"}, {"attempt", ".*"}, {"datasource", "prometheus"}};

TEST(Dashboards, CommittedJsonMatchesTheGenerator) {
  const test::TempDir tmp("torus-dashboards");
  const fs::path& dir = tmp.path();
  const auto result = testing::run_command("/usr/bin/python3 " + (kSource / "dashboards/build_dashboards.py").string() +
                                           " " + dir.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  int compared = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto committed = kSource / "dashboards" / entry.path().filename();
    EXPECT_EQ(slurp(entry.path()), slurp(committed))
        << committed << " is stale: run dashboards/build_dashboards.py and commit the result";
    ++compared;
  }
  EXPECT_EQ(compared, 4);
  EXPECT_EQ(testing::dashboard_files(kSource).size(), 4u) << "a dashboard JSON not written by the generator";
}

TEST(Dashboards, StructureIsSound) {
  std::set<std::string> uids;
  for (const auto& file : testing::dashboard_files(kSource)) {
    SCOPED_TRACE(file.string());
    const auto d = load(file);
    EXPECT_EQ(d.value("schemaVersion", 0), 41);
    EXPECT_TRUE(uids.insert(d.value("uid", "")).second) << "uid repeats: " << d.value("uid", "");
    EXPECT_FALSE(d.value("title", "").empty());

    std::set<std::string> defined;
    std::set<std::string> used;
    bool has_datasource_variable = false;
    for (const auto& v : d["templating"]["list"]) {
      defined.insert(v["name"].get<std::string>());
      if (v["type"] == "datasource" && v["query"] == "prometheus") has_datasource_variable = true;
      if (v.contains("definition")) {
        for (const auto& name : referenced_variables(v["definition"].get<std::string>())) used.insert(name);
      }
    }
    EXPECT_TRUE(has_datasource_variable) << "no Prometheus datasource variable";

    std::set<int> ids;
    for (const auto& p : d["panels"]) {
      const std::string title = p.value("title", "");
      EXPECT_TRUE(ids.insert(p.value("id", -1)).second) << "panel id repeats: " << p.value("id", -1);
      EXPECT_FALSE(title.empty()) << "panel " << p.value("id", -1) << " has no title";
      const auto& grid = p["gridPos"];
      EXPECT_LE(grid.value("x", 99) + grid.value("w", 99), 24) << title;
      if (p["type"] == "row") continue;
      EXPECT_EQ(p["datasource"]["uid"], "${datasource}") << title;
      ASSERT_TRUE(p.contains("targets") && !p["targets"].empty()) << title << " has no targets";
      std::set<std::string> ref_ids;
      for (const auto& t : p["targets"]) {
        EXPECT_EQ(t["datasource"]["uid"], "${datasource}") << title;
        EXPECT_TRUE(ref_ids.insert(t.value("refId", "")).second) << title << ": refId repeats";
        EXPECT_FALSE(t.value("expr", "").empty()) << title;
        for (const auto& name : referenced_variables(t.value("expr", ""))) used.insert(name);
      }
      used.insert("datasource");
    }
    for (const auto& name : used) EXPECT_TRUE(defined.count(name)) << "$" << name << " is used but not defined";
    for (const auto& name : defined) EXPECT_TRUE(used.count(name)) << "$" << name << " is defined but never used";
  }
}

TEST(Dashboards, WorkerDashboardsAreTemplatedByNamespaceJobAndAttempt) {
  for (const char* name : {"torus-job-overview.json", "torus-ranks.json", "torus-communication.json"}) {
    SCOPED_TRACE(name);
    for (const auto& q : testing::dashboard_queries(kSource / "dashboards" / name)) {
      EXPECT_NE(q.expr.find("namespace=\"$namespace\""), std::string::npos) << q.panel_title << ": " << q.expr;
      EXPECT_NE(q.expr.find("job=\"$job\""), std::string::npos) << q.panel_title << ": " << q.expr;
      EXPECT_NE(q.expr.find("attempt=~\"$attempt\""), std::string::npos) << q.panel_title << ": " << q.expr;
    }
  }
}

TEST(Dashboards, EveryExpressionParsesInPrometheus) {
  testing::PrometheusServer prometheus({});
  int checked = 0;
  for (const auto& file : testing::dashboard_files(kSource)) {
    for (const auto& q : testing::dashboard_queries(file)) {
      const std::string expr = testing::substitute_variables(q.expr, kVariableValues);
      const auto reply = prometheus.query_raw(expr);
      EXPECT_EQ(reply.status, 200) << q.dashboard << " / panel " << q.panel_id << " '" << q.panel_title << "' "
                                   << q.ref_id << ":\n  " << expr << "\n  " << reply.body;
      ++checked;
    }
    // The selectors inside the variables' label_values(...) queries too.
    static const std::regex kLabelValues(R"(label_values\((.*),\s*[A-Za-z_]+\))");
    for (const auto& v : load(file)["templating"]["list"]) {
      std::smatch m;
      const std::string definition = v.value("definition", "");
      if (!std::regex_match(definition, m, kLabelValues)) continue;
      const auto reply = prometheus.query_raw(testing::substitute_variables(m[1].str(), kVariableValues));
      EXPECT_EQ(reply.status, 200) << file << " variable " << v["name"] << ": " << reply.body;
    }
  }
  EXPECT_GT(checked, 40);
}

// Stands in for a running gang until the end-to-end `torus run` test exists: two ranks and an operator, each with
// its own registry and exporter, updated continuously like the real processes.
class SyntheticGang {
 public:
  SyntheticGang() {
    for (int rank = 0; rank < 2; ++rank) {
      ranks_.push_back(std::make_unique<Rank>(rank));
    }
    operator_ = std::make_unique<OperatorMetrics>(operator_registry_, "test");
    operator_exporter_ = std::make_unique<HttpExporter>(operator_registry_, HttpExporterOptions{});
    operator_->leader.set(1);
    operator_->set_jobs_by_phase({{{"team-a", "Running"}, 1}});
    operator_->gang_restarts.labels({"team-a", "fashion", "pod_failed"}).inc();
    operator_->time_to_running.labels({"team-a"}).observe(8);
    operator_->time_to_first_step.labels({"team-a"}).observe(15);
    operator_->record_api_request("get", 200);
    operator_->record_api_request("patch", 409);
    operator_->reconcile_errors.labels({"api"}).inc();
    updater_ = std::thread([this] { update_until_stopped(); });
  }
  ~SyntheticGang() {
    stop_ = true;
    updater_.join();
  }

  std::vector<std::string> targets() const {
    std::vector<std::string> out;
    for (const auto& r : ranks_) out.push_back("127.0.0.1:" + std::to_string(r->exporter.port()));
    out.push_back("127.0.0.1:" + std::to_string(operator_exporter_->port()));
    return out;
  }

 private:
  struct Rank {
    explicit Rank(int rank)
        : index(rank),
          metrics(registry, "fashion", "team-a", rank, 0),
          goodput(registry, "fashion", "team-a", rank, 0),
          exporter(registry, {}) {
      goodput.add(process::TimePart::kStartup, 2.5);
      goodput.set_comm_init(0.4);
      testing::set_sample_plan(metrics);
      metrics.checkpoint_seconds.observe(0.3);
      metrics.checkpoints.inc();
    }
    int index;
    Registry registry;
    WorkerMetrics metrics;
    GoodputMetrics goodput;
    HttpExporter exporter;
    int step = 0;
  };

  void update_until_stopped() {
    while (!stop_) {
      for (auto& r : ranks_) {
        auto& m = r->metrics;
        ++r->step;
        // Rank 1 is the straggler: it computes longer, rank 0 waits for it in the all-reduce.
        const double compute = r->index == 1 ? 0.018 : 0.012;
        m.record_step({.step = 0.02, .data_wait = 0.001, .compute = compute, .comm_wait = 0.019 - compute}, 128);
        r->goodput.add(process::TimePart::kTraining, compute);
        r->goodput.add(process::TimePart::kDataWait, 0.001);
        r->goodput.add(process::TimePart::kCommWait, 0.019 - compute);
        m.global_step.set(r->step);
        m.epoch.set(r->step / 250.0);
        m.loss.set(2.0 / (1 + r->step));
        m.train_accuracy.set(0.5);
        m.validation_accuracy.set(0.8);
        m.learning_rate.set(0.1);
        m.images_per_second.set(6400);
        m.collective_sequence.set(r->step);
        m.collective("ring", "global").observe(1e6, 0.004, 2.5e8);
        m.update_resident_memory();
      }
      operator_->reconciles.inc();
      operator_->reconcile_seconds.observe(0.002);
      operator_->record_api_request("get", 200);
      // Paces the producer like a training step does; nothing to wait on here.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::vector<std::unique_ptr<Rank>> ranks_;
  Registry operator_registry_;
  std::unique_ptr<OperatorMetrics> operator_;
  std::unique_ptr<HttpExporter> operator_exporter_;
  std::atomic<bool> stop_{false};
  std::thread updater_;
};

TEST(Dashboards, EveryPanelReturnsDataFromAScrapedGang) {
  SyntheticGang gang;
  testing::PrometheusServer prometheus({.targets = gang.targets()});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  std::vector<std::string> empty;
  for (const auto& file : testing::dashboard_files(kSource)) {
    for (const auto& q : testing::dashboard_queries(file)) {
      const std::string expr = testing::substitute_variables(q.expr, kVariableValues);
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      const auto result = prometheus.wait_for_series(expr, std::max(left, std::chrono::milliseconds(0)));
      if (result.empty()) empty.push_back(q.dashboard + " / '" + q.panel_title + "' " + q.ref_id + ": " + expr);
    }
  }
  std::string names;
  for (const auto& e : empty) names += "\n  " + e;
  EXPECT_TRUE(empty.empty()) << "panels with no data:" << names << "\nprometheus log:\n" << prometheus.recent_log();
}

TEST(Dashboards, SubstitutionAndExtractionHelpers) {
  EXPECT_EQ(testing::substitute_variables("rate(x{a=\"$job\",b=~\"${attempt:regex}\"}[$__rate_interval]) [[job]]",
                                          {{"job", "j"}, {"attempt", "1|2"}}, "30s"),
            "rate(x{a=\"j\",b=~\"1|2\"}[30s]) j");
  EXPECT_EQ(testing::substitute_variables("$unknown", {}), "$unknown");
  EXPECT_THROW(testing::dashboard_queries(kSource / "dashboards/alerts/torus-rules.yaml"), std::exception);
  const auto queries = testing::dashboard_queries(kSource / "dashboards/torus-ranks.json");
  ASSERT_FALSE(queries.empty());
  EXPECT_EQ(queries[0].dashboard, "Torus / Ranks");
  EXPECT_EQ(queries[0].panel_id, 1);
  EXPECT_EQ(queries[0].ref_id, "A");
}

}  // namespace
}  // namespace torus::metrics
