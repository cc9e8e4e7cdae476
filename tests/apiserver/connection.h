#pragma once
// A connection of the stand-in's server as its request handler sees it: the socket, its TLS stream once
// handshaken, the client certificate's user. Internal to tests/apiserver (server.cc, request_handler*.cc).
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <string>
#include <thread>

#include "tests/apiserver/server.h"

namespace torus::standin {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

struct ApiServer::Connection {
  explicit Connection(tcp::socket s) : socket(std::move(s)) {}
  // Runs `io` on the connection's byte stream: the TLS stream once handshaken, else the plain socket.
  template <class Io>
  auto with_stream(Io&& io) {
    if (tls) return io(*tls);
    return io(socket);
  }
  tcp::socket socket;
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;
  std::string certificate_user;  // the CN of a client certificate the CA signed, once handshaken
  std::vector<std::string> certificate_groups;  // its O entries
  std::thread thread;
  std::atomic<bool> done{false};
};

}  // namespace torus::standin
