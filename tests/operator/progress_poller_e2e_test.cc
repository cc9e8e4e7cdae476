// Progress of a quiet Running job stays fresh (issue 17 point 3): the operator reads rank 0's /metrics on its period
// (here --progress-interval 2) without any other event. Rank 0 is a real worker metrics endpoint (WorkerMetrics
// served by the HttpExporter) on the pod's loopback address (the stand-in's kubelet gives pods 127.x.y.z) at the
// job's metricsPort.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/metrics/goodput_metrics.h"
#include "common/metrics/http_exporter.h"
#include "common/metrics/worker_metrics.h"
#include "tests/operator/e2e_support.h"

namespace torus::controller {
namespace {

using namespace e2e;

class ProgressPollerE2E : public OperatorE2E {
 protected:
  static void SetUpTestSuite() {
    operator_flags_ = {"--progress-interval", "2"};
    OperatorE2E::SetUpTestSuite();
  }
  static int64_t progress_step(const std::string& name) {
    auto j = job(name);
    if (!j) return -1;
    return j->value("status", json::object()).value("progress", json::object()).value("step", int64_t{-1});
  }
};

// A port no one listens on now (the kernel's pick on 127.0.0.1, released): the job's metricsPort.
uint16_t unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

TEST_F(ProgressPollerE2E, AQuietRunningJobIsPolledOnThePeriod) {
  const uint16_t port = unused_port();
  ASSERT_NE(port, 0);
  const std::string file = (dir_ / "victor.yaml").string();
  std::ofstream(file) << job_yaml("victor", 1) << "  metricsPort: " << port << "\n";
  ASSERT_EQ(kubectl({"apply", "-f", file}).code, 0);
  ASSERT_TRUE(eventually([] { return gang_running("victor", 1, 0); })) << phase("victor");
  wait_phase("victor", "Running");
  const std::string ip = pods_of("victor")[0]["status"].value("podIP", "");
  ASSERT_EQ(ip.rfind("127.", 0), 0u) << "pod IP " << ip << ": tests only ever reach loopback";

  metrics::Registry registry;
  metrics::WorkerMetrics rank0(registry, "victor", kNs, 0, 0);
  metrics::GoodputMetrics goodput(registry, "victor", kNs, 0, 0);
  goodput.add(process::TimePart::kStartup, 1.5);
  goodput.add(process::TimePart::kTraining, 12.25);
  rank0.global_step.set(100);
  rank0.epoch.set(0.5);
  metrics::HttpExporter exporter(registry, {.host = ip, .port = port});
  ASSERT_TRUE(eventually([] { return progress_step("victor") == 100; }, 20s)) << progress_step("victor");
  // Nothing changes in the cluster from here on: only the period can bring the new step into the status.
  rank0.global_step.set(250);
  rank0.epoch.set(1.25);
  ASSERT_TRUE(eventually([] { return progress_step("victor") == 250; }, 20s)) << progress_step("victor");
  EXPECT_EQ(job("victor")->at("status").at("progress").value("epoch", -1), 2) << "1.25 done: the 2nd under way";
  // status.goodput (issue 31.2): rank 0's ledger, through the CRD's schema (nothing pruned).
  const json goodput_status = job("victor")->at("status").value("goodput", json::object());
  EXPECT_DOUBLE_EQ(goodput_status.value("seconds", json::object()).value("training", -1.0), 12.25) << goodput_status;
  EXPECT_DOUBLE_EQ(goodput_status.value("seconds", json::object()).value("startup", -1.0), 1.5) << goodput_status;
  EXPECT_EQ(goodput_status.value("lastStep", -1), 250) << goodput_status;
  EXPECT_GT(goodput_status.value("ratio", -1.0), 0) << goodput_status;
  ASSERT_EQ(kubectl({"delete", "trainingjob", "victor", "--wait=false"}).code, 0);
}

}  // namespace
}  // namespace torus::controller
