#pragma once
// Test helpers around a real Prometheus: a tiny HTTP client, promtool runs, a Prometheus server started on
// 127.0.0.1 that scrapes given targets, and the PromQL of every Grafana dashboard panel.
// Library target `torus_test_prometheus`; the end-to-end job test (a `torus run` scraped by Prometheus, every
// panel's query must return data) reuses it.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/shell.h"

namespace torus::metrics::testing {

// ---- HTTP ----

struct HttpReply {
  int status = 0;
  std::string content_type;
  std::string body;
};

// One GET over a fresh connection. Throws SystemError when the connection fails, Timeout past `timeout`.
HttpReply http_get(const std::string& host, uint16_t port, const std::string& target,
                   std::chrono::milliseconds timeout = std::chrono::seconds(5));
// Percent-encodes a query parameter value (RFC 3986 unreserved characters stay).
std::string url_encode(const std::string& value);

// ---- tools ----

using ToolResult = ::torus::test::ShellResult;  // exit code, stdout and stderr together

// Runs `sh -c command`, returning its exit code and output.
ToolResult run_command(const std::string& command);
// `promtool check metrics` on this exposition text (promtool reads stdin): 0 clean, 1 parse error, 3 lint problems.
ToolResult promtool_check_metrics(const std::string& exposition);

inline constexpr const char* kPrometheusBinary = "/usr/bin/prometheus";
inline constexpr const char* kPromtoolBinary = "/usr/bin/promtool";

// ---- Prometheus server ----

struct PrometheusOptions {
  std::vector<std::string> targets;  // "127.0.0.1:PORT", scraped as one job with honor_labels (see docs)
  std::vector<std::filesystem::path> rule_files;
  std::string scrape_interval = "1s";
  std::chrono::seconds ready_deadline{30};
};

// A Prometheus server on 127.0.0.1 with its own config and TSDB under a fresh temporary directory, stopped and
// removed by the destructor.
class PrometheusServer {
 public:
  // Returns once `/-/ready` answers 200. Throws Timeout (with the server's last log lines) when it does not
  // within options.ready_deadline, SystemError when it exits first.
  explicit PrometheusServer(const PrometheusOptions& options);
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  uint16_t port() const { return port_; }
  // GET /api/v1/query?query=... : the raw reply (400 with an error body when the expression does not parse).
  HttpReply query_raw(const std::string& promql) const;
  // The `data.result` array of an instant query; throws InvalidArgument with Prometheus's error otherwise.
  nlohmann::json query(const std::string& promql) const;
  // Re-runs the query until it returns at least one series or `deadline` passes; returns the last result
  // (empty when none came).
  nlohmann::json wait_for_series(const std::string& promql, std::chrono::milliseconds deadline) const;
  // The server's recent log lines, for failure messages.
  std::string recent_log() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

// A port that was free a moment ago (bound to port 0, then released).
uint16_t pick_free_port();

// ---- Grafana dashboards ----

struct PanelQuery {
  std::string dashboard;  // the dashboard's title
  int panel_id = 0;
  std::string panel_title;
  std::string ref_id;
  std::string expr;  // PromQL with Grafana variables still in it
};

// Every Prometheus target expression in a dashboard JSON file, rows' nested panels included. Throws
// InvalidArgument naming the file when it is not a dashboard.
std::vector<PanelQuery> dashboard_queries(const std::filesystem::path& dashboard_json);
// The dashboards shipped in dashboards/*.json of the source tree.
std::vector<std::filesystem::path> dashboard_files(const std::filesystem::path& source_dir);
// Replaces Grafana variables ($name, ${name}, ${name:fmt}, [[name]]) with concrete values so Prometheus can run the
// expression; the built-ins $__rate_interval, $__interval and $__range get `interval` unless given in `values`.
std::string substitute_variables(const std::string& expr, const std::map<std::string, std::string>& values,
                                 const std::string& interval = "1m");

}  // namespace torus::metrics::testing
