// kube-standin-load: the stand-in's request capacity. Starts an in-process server (clients and server share the
// machine, so this is a floor), opens W watches on pods, then C keep-alive clients each loop over
// create pod -> get -> patch status -> list by label for D seconds. Prints per-verb rates and
//   RESULT standin_requests_per_second=X watch_events_per_second=Y clients=C watches=W
//
//   kube-standin-load [--clients 8] [--watches 50] [--seconds 5]
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/util/error.h"
#include "common/util/main_guard.h"
#include "tests/apiserver/server.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Flags {
  int clients = 8;
  int watches = 50;
  int seconds = 5;
};

Flags parse_flags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string name = argv[i];
    int value = std::atoi(argv[i + 1]);
    if (value <= 0 && name != "--watches") throw torus::InvalidArgument(name + ": expected a positive integer");
    if (name == "--clients") {
      flags.clients = value;
    } else if (name == "--watches") {
      flags.watches = value;
    } else if (name == "--seconds") {
      flags.seconds = value;
    } else {
      throw torus::InvalidArgument("unknown flag \"" + name + "\"");
    }
  }
  if (argc % 2 == 0) throw torus::InvalidArgument("flags come in pairs: --clients N --watches N --seconds N");
  return flags;
}

class Client {
 public:
  explicit Client(uint16_t port) : socket_(io_) {
    socket_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    socket_.set_option(tcp::no_delay(true));
  }
  int call(http::verb verb, const std::string& target, const std::string& body = "",
           const std::string& type = "application/json") {
    http::request<http::string_body> request{verb, target, 11};
    request.set(http::field::host, "127.0.0.1");
    if (!body.empty()) request.set(http::field::content_type, type);
    request.body() = body;
    request.prepare_payload();
    http::write(socket_, request);
    http::response<http::string_body> response;
    http::read(socket_, buffer_, response);
    return static_cast<int>(response.result_int());
  }

 private:
  asio::io_context io_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
};

// Counts watch events until the server stops.
void watch_events(uint16_t port, std::atomic<int64_t>& events) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  http::request<http::empty_body> request{http::verb::get, "/api/v1/namespaces/default/pods?watch=1&resourceVersion=1",
                                          11};
  request.set(http::field::host, "127.0.0.1");
  http::write(socket, request);
  beast::flat_buffer buffer;
  http::response_parser<http::empty_body> parser;
  parser.body_limit(boost::none);
  auto count_lines = [&](uint64_t, beast::string_view body, beast::error_code&) -> std::size_t {
    for (char c : body) events += c == '\n' ? 1 : 0;
    return body.size();
  };
  parser.on_chunk_body(count_lines);
  beast::error_code ec;
  while (!ec && !parser.is_done()) http::read_some(socket, buffer, parser, ec);
}

int run(int argc, char** argv) {
  Flags flags = parse_flags(argc, argv);
  torus::standin::ApiServer server;
  server.start();
  uint16_t port = server.port();
  std::atomic<int64_t> events{0};
  std::vector<std::thread> watchers;
  for (int i = 0; i < flags.watches; ++i) watchers.emplace_back([&] { watch_events(port, events); });
  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> failures{0};
  auto end = Clock::now() + std::chrono::seconds(flags.seconds);
  std::vector<std::thread> clients;
  for (int c = 0; c < flags.clients; ++c) {
    clients.emplace_back([&, c] {
      Client client(port);
      const std::string base = "/api/v1/namespaces/default/pods";
      for (int i = 0; Clock::now() < end; ++i) {
        std::string name = "load-" + std::to_string(c) + "-" + std::to_string(i);
        std::string pod = R"({"metadata":{"name":")" + name + R"(","labels":{"client":")" + std::to_string(c) +
                          R"("}},"spec":{"containers":[{"name":"w","image":"i:1"}]}})";
        int codes[] = {
            client.call(http::verb::post, base, pod), client.call(http::verb::get, base + "/" + name),
            client.call(http::verb::patch, base + "/" + name + "/status", R"({"status":{"phase":"Running"}})",
                        "application/merge-patch+json"),
            client.call(http::verb::get, base + "?labelSelector=client%3D" + std::to_string(c) + "&limit=5")};
        for (int code : codes) (code < 300 ? requests : failures) += 1;
      }
    });
  }
  auto start = Clock::now();
  for (auto& t : clients) t.join();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  int64_t seen = events.load();
  server.stop();
  for (auto& t : watchers) t.join();
  std::printf("requests %lld (failed %lld) in %.2f s with %d clients and %d watches; %lld watch events delivered\n",
              static_cast<long long>(requests.load()), static_cast<long long>(failures.load()), seconds, flags.clients,
              flags.watches, static_cast<long long>(seen));
  std::printf("RESULT standin_requests_per_second=%.0f watch_events_per_second=%.0f clients=%d watches=%d\n",
              requests.load() / seconds, seen / seconds, flags.clients, flags.watches);
  return failures.load() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return torus::run_main("kube-standin-load", [&] { return run(argc, argv); });
}
