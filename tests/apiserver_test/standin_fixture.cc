#include "tests/apiserver_test/standin_fixture.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/beast/core.hpp>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "common/process/supervisor.h"
#include "common/util/error.h"
#include "tests/apiserver/tls.h"

namespace torus::standin::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

int remaining_ms(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// Waits until the socket is readable or the deadline passes.
bool wait_readable(tcp::socket& socket, std::chrono::steady_clock::time_point deadline) {
  pollfd fd{socket.native_handle(), POLLIN, 0};
  return ::poll(&fd, 1, remaining_ms(deadline)) > 0;
}

tcp::socket connect(asio::io_context& io, uint16_t port) {
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  socket.non_blocking(true);  // reads are awaited with poll() and a deadline
  return socket;
}

void write_all(tcp::socket& socket, http::request<http::string_body>& request) {
  socket.non_blocking(false);
  http::write(socket, request);
  socket.non_blocking(true);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// kubectl

Kubectl::Kubectl(std::string kubeconfig, std::string cache_dir)
    : kubeconfig_(std::move(kubeconfig)), cache_dir_(std::move(cache_dir)) {}

std::vector<std::string> Kubectl::argv(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {TORUS_KUBECTL, "--kubeconfig", kubeconfig_, "--cache-dir", cache_dir_};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

CommandResult Kubectl::run(const std::vector<std::string>& args, std::chrono::seconds timeout) const {
  CommandResult result;
  std::mutex mutex;
  process::Supervisor supervisor([&](size_t, process::Stream stream, std::string_view line) {
    std::lock_guard lock(mutex);
    (stream == process::Stream::kStdout ? result.out : result.err) += std::string(line) + "\n";
  });
  supervisor.start(process::ProcessSpec{"kubectl", argv(args), {}});
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto left = std::chrono::milliseconds(remaining_ms(deadline));
    if (auto ended = supervisor.wait_any(left)) {
      result.exit_code = ended->shell_code();
      return result;
    }
    if (left.count() == 0) {
      supervisor.stop_all(1s);
      std::string line;
      for (const std::string& a : args) line += " " + a;
      throw Timeout("kubectl" + line + ": did not finish within " + std::to_string(timeout.count()) + " s");
    }
  }
}

struct BackgroundKubectl::Impl {
  std::vector<std::string>* lines;
  process::Supervisor supervisor{[this](size_t, process::Stream stream, std::string_view line) {
    if (stream == process::Stream::kStdout) lines->emplace_back(line);
  }};
};

BackgroundKubectl::BackgroundKubectl(const Kubectl& kubectl, const std::vector<std::string>& args)
    : impl_(std::make_unique<Impl>()) {
  impl_->lines = &lines_;
  impl_->supervisor.start(process::ProcessSpec{"kubectl", kubectl.argv(args), {}});
}

BackgroundKubectl::~BackgroundKubectl() { impl_->supervisor.stop_all(1s); }

bool BackgroundKubectl::wait_for_line(const std::string& text, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto seen = [&] {
    for (const std::string& line : lines_) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  };
  while (!seen()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // Pumps output into lines_ a slice at a time (wait_any returns early only when the process ends, not on
    // output), so a line is seen within a slice of its arrival rather than at the deadline.
    const auto slice = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(remaining_ms(deadline)), 50ms);
    if (impl_->supervisor.wait_any(slice)) return seen();
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// HTTP

HttpReply http_request(uint16_t port, http::verb verb, const std::string& target, const std::string& body,
                       const std::string& content_type, std::chrono::milliseconds timeout) {
  asio::io_context io;
  tcp::socket socket = connect(io, port);
  http::request<http::string_body> request{verb, target, 11};
  request.set(http::field::host, "127.0.0.1");
  request.set(http::field::accept, "application/json");
  if (!body.empty()) request.set(http::field::content_type, content_type);
  request.body() = body;
  request.prepare_payload();
  write_all(socket, request);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  while (!parser.is_done()) {
    // Parse what is buffered first: read_some may stop after the header with the body already read.
    beast::error_code ec;
    http::read_some(socket, buffer, parser, ec);
    if (ec == asio::error::would_block) {
      if (!wait_readable(socket, deadline)) throw Timeout("HTTP " + target + ": no complete answer in time");
    } else if (ec) {
      throw SystemError("HTTP " + target + ": " + ec.message());
    }
  }
  auto& response = parser.get();
  HttpReply reply;
  reply.status = static_cast<int>(response.result_int());
  reply.body = response.body();
  reply.retry_after = std::string(response[http::field::retry_after]);
  for (auto it = response.find(http::field::warning); it != response.end() && it->name() == http::field::warning;
       ++it) {
    reply.warnings.emplace_back(it->value());
  }
  return reply;
}

WatchClient::WatchClient(uint16_t port, const std::string& target) : socket_(connect(io_, port)) {
  http::request<http::string_body> request{http::verb::get, target, 11};
  request.set(http::field::host, "127.0.0.1");
  request.set(http::field::accept, "application/json");
  write_all(socket_, request);
  parser_.body_limit(boost::none);
  // Beast keeps a reference to the callback: it lives in a member.
  on_chunk_ = [this](uint64_t, beast::string_view body, beast::error_code&) -> std::size_t {
    pending_.append(body.data(), body.size());
    size_t newline;
    while ((newline = pending_.find('\n')) != std::string::npos) {
      events_.push_back(json::parse(pending_.substr(0, newline)));
      pending_.erase(0, newline + 1);
    }
    return body.size();
  };
  parser_.on_chunk_body(on_chunk_);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!parser_.is_header_done()) {
    if (!read_more(deadline)) throw Timeout("watch " + target + ": no response header in time");
  }
  status_ = static_cast<int>(parser_.get().result_int());
}

bool WatchClient::read_more(std::chrono::steady_clock::time_point deadline) {
  if (end_ != End::kOpen) return false;
  // Parse what is buffered first; wait for the socket only when the parser needs more bytes.
  beast::error_code ec;
  http::read_some(socket_, buffer_, parser_, ec);
  if (ec == asio::error::would_block) return wait_readable(socket_, deadline);
  if (ec) {
    end_ = End::kBroken;
    return false;
  }
  if (parser_.is_done()) end_ = End::kFinished;
  return true;
}

std::optional<json> WatchClient::next(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (events_.empty()) {
    if (!read_more(deadline) && events_.empty()) return std::nullopt;
  }
  json event = std::move(events_.front());
  events_.pop_front();
  return event;
}

std::vector<json> WatchClient::until(const std::string& type, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<json> out;
  while (auto event = next(std::chrono::milliseconds(remaining_ms(deadline)))) {
    out.push_back(*event);
    if ((*event)["type"] == type) break;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Fixture

void StandinTest::SetUp() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  dir_ = std::string(TORUS_BINARY_DIR) + "/tests/apiserver_tmp/" + info->test_suite_name() + "." + info->name();
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_ + "/cache");
  server_ = std::make_unique<ApiServer>(server_options());
  server_->start();
  kubelet_ = std::make_unique<KubeletSim>(*server_);
  kubectl_ = std::make_unique<Kubectl>(server_->write_kubeconfig(dir_ + "/kubeconfig"), dir_ + "/cache");
}

void StandinTest::TearDown() {
  kubelet_.reset();
  if (server_) server_->stop();
}

std::string StandinTest::ok(const std::vector<std::string>& args) const {
  CommandResult r = kubectl(args);
  std::string line;
  for (const std::string& a : args) line += " " + a;
  EXPECT_EQ(r.exit_code, 0) << "kubectl" << line << "\nstdout: " << r.out << "\nstderr: " << r.err;
  return r.out;
}

std::string StandinTest::write_file(const std::string& name, const std::string& text) const {
  std::string path = dir_ + "/" + name;
  std::ofstream(path) << text;
  return path;
}

ServerOptions StandinTest::authenticated_options() {
  ServerOptions options;
  options.tls = make_tls_material();
  options.authentication = ServerOptions::Authentication::kRequired;
  return options;
}

Kubectl StandinTest::as_token(const std::string& token) const {
  std::ifstream in(dir_ + "/kubeconfig");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const std::string from = "token: standin-token";
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << text;
  if (at != std::string::npos) text.replace(at, from.size(), "token: " + token);
  return Kubectl(write_file("sa-kubeconfig", text), dir_ + "/sa-cache");
}

std::string StandinTest::fixture(const std::string& name) const {
  return std::string(TORUS_SOURCE_DIR) + "/tests/apiserver_test/fixtures/" + name;
}

void StandinTest::apply_crd() const { ok({"apply", "-f", fixture("crd_trainingjobs.yaml")}); }

ResourcePtr StandinTest::type(const std::string& group, const std::string& version, const std::string& plural) const {
  ResourcePtr t = server_->store().registry().find(group, version, plural);
  if (!t) throw InvalidArgument("no resource " + group + "/" + version + "/" + plural);
  return t;
}

}  // namespace torus::standin::testing
