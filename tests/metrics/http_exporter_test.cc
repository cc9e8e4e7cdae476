#include "common/metrics/http_exporter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/util/error.h"
#include "tests/metrics/prometheus_fixture.h"

namespace torus::metrics {
namespace {

using testing::http_get;

TEST(HttpExporter, ServesMetricsAndHealthOverARealSocket) {
  Registry registry;
  Counter& scrapes = registry.counter("torus_test_things_total", "Things.").labels({});
  HttpExporter exporter(registry, {});
  ASSERT_NE(exporter.port(), 0);

  scrapes.inc(3);
  const auto metrics = http_get("127.0.0.1", exporter.port(), "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.content_type, kExpositionContentType);
  EXPECT_EQ(metrics.body, registry.expose());
  EXPECT_NE(metrics.body.find("torus_test_things_total 3\n"), std::string::npos) << metrics.body;

  // A later scrape sees later values: nothing is cached.
  scrapes.inc();
  EXPECT_NE(http_get("127.0.0.1", exporter.port(), "/metrics?x=1").body.find("torus_test_things_total 4\n"),
            std::string::npos);

  const auto health = http_get("127.0.0.1", exporter.port(), "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  EXPECT_EQ(http_get("127.0.0.1", exporter.port(), "/nope").status, 404);
}

TEST(HttpExporter, ExtraHandlersAndFailingHandlers) {
  Registry registry;
  HttpExporter exporter(registry, {});
  std::atomic<bool> ready{false};
  exporter.add_handler("/readyz", [&] { return HttpResponse{ready ? 200 : 503, "text/plain", ready ? "ok" : "no"}; });
  exporter.add_handler("/boom", []() -> HttpResponse { throw std::runtime_error("handler failed on purpose"); });

  EXPECT_EQ(http_get("127.0.0.1", exporter.port(), "/readyz").status, 503);
  ready = true;
  const auto reply = http_get("127.0.0.1", exporter.port(), "/readyz");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "ok");
  const auto boom = http_get("127.0.0.1", exporter.port(), "/boom");
  EXPECT_EQ(boom.status, 500);
  EXPECT_NE(boom.body.find("handler failed on purpose"), std::string::npos);
  // The exporter survives a failing handler.
  EXPECT_EQ(http_get("127.0.0.1", exporter.port(), "/healthz").status, 200);
}

TEST(HttpExporter, ConcurrentScrapersAllGetAnswers) {
  Registry registry;
  auto& g = registry.gauge("torus_test_value", "Value.", {"i"});
  for (int i = 0; i < 50; ++i) g.labels({std::to_string(i)}).set(i);
  HttpExporter exporter(registry, {});
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&] {
      for (int k = 0; k < 10; ++k) {
        if (http_get("127.0.0.1", exporter.port(), "/metrics").body == registry.expose()) ++ok;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 80);
}

TEST(HttpExporter, PortInUseIsAClearError) {
  Registry registry;
  HttpExporter first(registry, {});
  try {
    HttpExporter second(registry, {.host = "127.0.0.1", .port = first.port()});
    FAIL() << "expected SystemError for a port in use";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(first.port())), std::string::npos) << e.what();
  }
  EXPECT_THROW(HttpExporter(registry, {.host = "not-an-ip", .port = 0}), InvalidArgument);
}

TEST(HttpExporter, DestructorReturnsWhileAClientHoldsAnIdleConnection) {
  Registry registry;
  auto exporter = std::make_unique<HttpExporter>(registry, HttpExporterOptions{});
  // A client that connects and never sends a request must not keep the exporter alive.
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket idle(ioc);
  idle.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), exporter->port()));
  EXPECT_EQ(http_get("127.0.0.1", exporter->port(), "/healthz").status, 200);
  exporter.reset();  // must return promptly; ctest's timeout catches a hang
  SUCCEED();
}

}  // namespace
}  // namespace torus::metrics
