#include "tests/metrics/prometheus_fixture.h"

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include "common/process/supervisor.h"
#include "common/util/error.h"

namespace torus::metrics::testing {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr size_t kLogLinesKept = 60;
// How often readiness and queries are retried: Prometheus offers nothing to wait on but its HTTP API.
constexpr std::chrono::milliseconds kPollInterval{100};

std::filesystem::path make_temp_dir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) throw_errno("mkdtemp " + pattern);
  return pattern;
}

std::string yaml_quoted(const std::string& s) { return nlohmann::json(s).dump(); }  // JSON strings are YAML

std::string prometheus_config(const PrometheusOptions& options) {
  std::ostringstream out;
  out << "global:\n"
      << "  scrape_interval: " << options.scrape_interval << "\n"
      << "  scrape_timeout: " << options.scrape_interval << "\n"
      << "  evaluation_interval: " << options.scrape_interval << "\n";
  if (!options.rule_files.empty()) {
    out << "rule_files:\n";
    for (const auto& f : options.rule_files)
      out << "  - " << yaml_quoted(std::filesystem::absolute(f).string()) << "\n";
  }
  out << "scrape_configs:\n"
      << "  - job_name: torus\n"
      // Torus metrics carry their own `job` (the TrainingJob) and `namespace` labels; keep them.
      << "    honor_labels: true\n"
      << "    static_configs:\n"
      << "      - targets: [";
  for (size_t i = 0; i < options.targets.size(); ++i) out << (i ? ", " : "") << yaml_quoted(options.targets[i]);
  out << "]\n";
  return out.str();
}

}  // namespace

// ---- HTTP ----

HttpReply http_get(const std::string& host, uint16_t port, const std::string& target,
                   std::chrono::milliseconds timeout) {
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  const std::string where = host + ":" + std::to_string(port) + target;
  beast::error_code failure;
  http::request<http::empty_body> request{http::verb::get, target, 11};
  request.set(http::field::host, host);
  request.set(http::field::connection, "close");
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  stream.expires_after(timeout);  // covers connect, write and read together
  stream.async_connect(tcp::endpoint(asio::ip::make_address(host), port), [&](beast::error_code ec) {
    if (ec) {
      failure = ec;
      return;
    }
    http::async_write(stream, request, [&](beast::error_code wec, size_t) {
      if (wec) {
        failure = wec;
        return;
      }
      http::async_read(stream, buffer, response, [&](beast::error_code rec, size_t) { failure = rec; });
    });
  });
  ioc.run();
  if (failure == beast::error::timeout) throw Timeout("GET http://" + where + ": no answer within timeout");
  if (failure) throw SystemError("GET http://" + where + ": " + failure.message());
  HttpReply reply;
  reply.status = static_cast<int>(response.result_int());
  reply.content_type = std::string(response[http::field::content_type]);
  reply.body = std::move(response.body());
  return reply;
}

std::string url_encode(const std::string& value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// ---- tools ----

ToolResult run_command(const std::string& command) { return ::torus::test::run_shell(command); }

ToolResult promtool_check_metrics(const std::string& exposition) {
  const auto dir = make_temp_dir("torus-promtool-");
  const auto file = dir / "metrics.txt";
  std::ofstream(file) << exposition;
  ToolResult result = run_command(std::string(kPromtoolBinary) + " check metrics < " + file.string());
  std::filesystem::remove_all(dir);
  return result;
}

uint16_t pick_free_port() {
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return acceptor.local_endpoint().port();
}

// ---- Prometheus server ----

struct PrometheusServer::Impl {
  std::filesystem::path dir;
  mutable std::mutex log_mutex;
  std::deque<std::string> log;
  std::atomic<bool> exited{false};
  std::atomic<bool> stopping{false};
  std::string exit_description;
  process::Supervisor supervisor{[this](size_t, process::Stream, std::string_view line) { keep(line); }};
  std::thread pump;  // drains the server's output so its pipes never fill

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  // Also runs when the constructor throws (not ready in time), so the server never outlives the fixture.
  ~Impl() {
    stopping = true;
    if (pump.joinable()) pump.join();
    supervisor.stop_all(std::chrono::seconds(5));
    std::error_code ignored;
    if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
  }

  void keep(std::string_view line) {
    std::lock_guard lock(log_mutex);
    log.emplace_back(line);
    if (log.size() > kLogLinesKept) log.pop_front();
  }

  void start(uint16_t port) {
    process::ProcessSpec spec;
    spec.name = "prometheus";
    spec.argv = {kPrometheusBinary, "--config.file=" + (dir / "prometheus.yml").string(),
                 "--web.listen-address=127.0.0.1:" + std::to_string(port),
                 "--storage.tsdb.path=" + (dir / "data").string(), "--log.level=warn"};
    supervisor.start(spec);
    pump = std::thread([this] {
      while (!stopping) {
        if (auto t = supervisor.wait_any(kPollInterval)) {
          std::lock_guard lock(log_mutex);
          exit_description = t->describe();
          exited = true;
          return;
        }
      }
    });
  }

  std::string recent_log() const {
    std::lock_guard lock(log_mutex);
    std::string out;
    for (const auto& line : log) out += line + "\n";
    return out;
  }
};

PrometheusServer::PrometheusServer(const PrometheusOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->dir = make_temp_dir("torus-prometheus-");
  std::ofstream(impl_->dir / "prometheus.yml") << prometheus_config(options);
  port_ = pick_free_port();
  impl_->start(port_);
  const auto deadline = Clock::now() + options.ready_deadline;
  for (;;) {
    if (impl_->exited) {
      throw SystemError("prometheus exited before it was ready (" + impl_->exit_description + "):\n" +
                        impl_->recent_log());
    }
    try {
      if (http_get("127.0.0.1", port_, "/-/ready", std::chrono::seconds(2)).status == 200) return;
    } catch (const Error&) {
      // not listening yet
    }
    if (Clock::now() > deadline) {
      throw Timeout("prometheus on port " + std::to_string(port_) + " not ready within " +
                    std::to_string(options.ready_deadline.count()) + " s:\n" + impl_->recent_log());
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

PrometheusServer::~PrometheusServer() = default;

HttpReply PrometheusServer::query_raw(const std::string& promql) const {
  return http_get("127.0.0.1", port_, "/api/v1/query?query=" + url_encode(promql));
}

nlohmann::json PrometheusServer::query(const std::string& promql) const {
  const HttpReply reply = query_raw(promql);
  const auto body = nlohmann::json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  if (reply.status != 200 || body.is_discarded() || body.value("status", "") != "success") {
    throw InvalidArgument("query '" + promql + "': HTTP " + std::to_string(reply.status) + ": " + reply.body);
  }
  return body["data"]["result"];
}

nlohmann::json PrometheusServer::wait_for_series(const std::string& promql, std::chrono::milliseconds deadline) const {
  const auto until = Clock::now() + deadline;
  for (;;) {
    nlohmann::json result = query(promql);
    if (!result.empty() || Clock::now() > until) return result;
    std::this_thread::sleep_for(kPollInterval);
  }
}

std::string PrometheusServer::recent_log() const { return impl_->recent_log(); }

// ---- Grafana dashboards ----

namespace {

void collect_panels(const nlohmann::json& panels, const std::string& dashboard, std::vector<PanelQuery>& out) {
  for (const auto& panel : panels) {
    if (panel.contains("panels")) collect_panels(panel["panels"], dashboard, out);  // collapsed rows
    if (!panel.contains("targets")) continue;
    for (const auto& target : panel["targets"]) {
      if (!target.contains("expr")) continue;
      PanelQuery q;
      q.dashboard = dashboard;
      q.panel_id = panel.value("id", 0);
      q.panel_title = panel.value("title", "");
      q.ref_id = target.value("refId", "");
      q.expr = target["expr"].get<std::string>();
      out.push_back(std::move(q));
    }
  }
}

}  // namespace

std::vector<PanelQuery> dashboard_queries(const std::filesystem::path& dashboard_json) {
  std::ifstream in(dashboard_json);
  if (!in) throw InvalidArgument(dashboard_json.string() + ": cannot open");
  const auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("panels") || !doc["panels"].is_array()) {
    throw InvalidArgument(dashboard_json.string() + ": expected a Grafana dashboard (a JSON object with 'panels')");
  }
  std::vector<PanelQuery> out;
  collect_panels(doc["panels"], doc.value("title", dashboard_json.filename().string()), out);
  return out;
}

std::vector<std::filesystem::path> dashboard_files(const std::filesystem::path& source_dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir / "dashboards")) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string substitute_variables(const std::string& expr, const std::map<std::string, std::string>& values,
                                 const std::string& interval) {
  static const std::regex kVariable(
      R"(\$\{([A-Za-z0-9_]+)(?::[A-Za-z0-9_]+)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)\]\])");
  std::string out;
  auto begin = std::sregex_iterator(expr.begin(), expr.end(), kVariable);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    const std::string name = m[1].matched ? m[1].str() : m[2].matched ? m[2].str() : m[3].str();
    out.append(expr, last, static_cast<size_t>(m.position()) - last);
    if (auto v = values.find(name); v != values.end()) {
      out += v->second;
    } else if (name == "__rate_interval" || name == "__interval" || name == "__range") {
      out += interval;
    } else {
      out += m.str();  // unknown: left for Prometheus to reject, which names it
    }
    last = static_cast<size_t>(m.position() + m.length());
  }
  out.append(expr, last);
  return out;
}

}  // namespace torus::metrics::testing
