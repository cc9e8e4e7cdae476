#pragma once
// The per-file tests of operator/kube and operator/controller run the code against the API stand-in in this process
// (tests/apiserver, plain HTTP on 127.0.0.1, no authentication: kube_client_tls_test.cc covers TLS): a server per
// test, a client with short retries, and a deadline-bounded wait for what other threads (informers, electors) do.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "operator/kube/client.h"
#include "tests/apiserver/server.h"
#include "tests/support/eventually.h"

namespace torus::kube::test {

using namespace std::chrono_literals;

// The in-process stand-in answers within milliseconds: a 2 ms poll keeps these tests fast.
inline bool eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout = 10s) {
  return torus::test::eventually(done, timeout, 2ms);
}

// Fast retries, so that a test of failures spends milliseconds in backoff, and a request timeout that ends a test
// whose server stopped answering.
inline ClientOptions fast_client_options() {
  ClientOptions o;
  o.qps = 0;
  o.max_retries = 3;
  o.retry_base = 1ms;
  o.retry_cap = 10ms;
  o.timeout = 10s;
  return o;
}

class InProcessStandin : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<standin::ApiServer>(server_options());
    server_->start();
    client_ = make_client(fast_client_options());
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
  }
  virtual standin::ServerOptions server_options() const { return {}; }

  std::unique_ptr<Client> make_client(const ClientOptions& options) const {
    ClusterConfig config;
    config.server = server_->url();
    return std::make_unique<Client>(config, options);
  }

  std::unique_ptr<standin::ApiServer> server_;
  std::unique_ptr<Client> client_;
};

}  // namespace torus::kube::test
