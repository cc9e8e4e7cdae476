#pragma once
// Test harness for the API stand-in: a server + simulated kubelet per test, the real kubectl as a subprocess (with
// a deadline), a blocking HTTP client and a watch client that reads newline-delimited events with timeouts.
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/apiserver/kubelet_sim.h"
#include "tests/apiserver/server.h"

namespace torus::standin::testing {

using json = nlohmann::json;
using namespace std::chrono_literals;

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the pinned kubectl (TORUS_KUBECTL) against a kubeconfig with its own discovery cache; throws torus::Timeout
// past the deadline.
class Kubectl {
 public:
  Kubectl(std::string kubeconfig, std::string cache_dir);
  CommandResult run(const std::vector<std::string>& args, std::chrono::seconds timeout = 30s) const;
  std::vector<std::string> argv(const std::vector<std::string>& args) const;

 private:
  std::string kubeconfig_;
  std::string cache_dir_;
};

// A long-running kubectl (e.g. `get -w`) whose output lines are collected while the test waits for them.
class BackgroundKubectl {
 public:
  BackgroundKubectl(const Kubectl& kubectl, const std::vector<std::string>& args);
  ~BackgroundKubectl();
  // Waits until some stdout line contains `text`; false at the deadline.
  bool wait_for_line(const std::string& text, std::chrono::milliseconds timeout = 10s);
  std::vector<std::string> lines() const { return lines_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<std::string> lines_;
};

struct HttpReply {
  int status = 0;
  std::string body;
  std::string retry_after;
  std::vector<std::string> warnings;
  json body_json() const { return json::parse(body); }
};

// One request on a fresh connection, with a deadline.
HttpReply http_request(uint16_t port, boost::beast::http::verb verb, const std::string& target,
                       const std::string& body = "", const std::string& content_type = "application/json",
                       std::chrono::milliseconds timeout = 10s);

// Reads a watch response event by event.
class WatchClient {
 public:
  WatchClient(uint16_t port, const std::string& target);
  int status() const { return status_; }
  // The next event, or nullopt when `timeout` passes first or the stream ended (see ended()).
  std::optional<json> next(std::chrono::milliseconds timeout = 5s);
  // Events until one has type `type` (returned last), or all read until the deadline.
  std::vector<json> until(const std::string& type, std::chrono::milliseconds timeout = 5s);
  enum class End { kOpen, kFinished, kBroken };  // kFinished: final chunk; kBroken: connection closed without it
  End ended() const { return end_; }

 private:
  bool read_more(std::chrono::steady_clock::time_point deadline);

  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_{io_};
  boost::beast::flat_buffer buffer_;
  boost::beast::http::response_parser<boost::beast::http::empty_body> parser_;
  std::function<std::size_t(uint64_t, boost::beast::string_view, boost::beast::error_code&)> on_chunk_;
  std::string pending_;
  std::deque<json> events_;
  int status_ = 0;
  End end_ = End::kOpen;
};

// A server with a 4-node kubelet simulation, a kubeconfig and a kubectl for it.
class StandinTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  virtual ServerOptions server_options() const { return {}; }
  // HTTPS with authentication required, so tokens and RBAC apply (the fixture's kubectl stays the admin).
  static ServerOptions authenticated_options();
  // A kubectl that authenticates with `token` only: the admin kubeconfig with its token replaced.
  Kubectl as_token(const std::string& token) const;

  CommandResult kubectl(const std::vector<std::string>& args) const { return kubectl_->run(args); }
  // kubectl that must succeed: returns stdout, fails the test with stderr otherwise.
  std::string ok(const std::vector<std::string>& args) const;
  // Writes `text` to a file in the test's directory and returns its path.
  std::string write_file(const std::string& name, const std::string& text) const;
  std::string fixture(const std::string& name) const;
  // Applies the fixture CRD (crds/trainingjobs.torus.dev.yaml is the API area's; this one is ours).
  void apply_crd() const;
  json get_json(const std::vector<std::string>& args) const { return json::parse(ok(args)); }
  // The served type (a shared_ptr: registry entries are replaced, never mutated); throws when it is not served.
  ResourcePtr type(const std::string& group, const std::string& version, const std::string& plural) const;

  std::string dir_;
  std::unique_ptr<ApiServer> server_;
  std::unique_ptr<KubeletSim> kubelet_;
  std::unique_ptr<Kubectl> kubectl_;
};

}  // namespace torus::standin::testing
