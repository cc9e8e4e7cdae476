// The Kubernetes client against an HTTPS stand-in that authenticates like a real apiserver (tests/apiserver/tls.h):
// every way the operator can be configured to reach a cluster (a kubeconfig's CA and token, its client
// certificate, an exec plugin's token or certificate, a rotating service-account token file, insecure skip verify)
// and the errors when it is not (no or wrong credentials, a server certificate no CA vouches for).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include "common/util/base64.h"
#include "common/util/rfc3339.h"
#include "operator/kube/client.h"
#include "operator/kube/config.h"
#include "tests/apiserver/server.h"
#include "tests/apiserver/tls.h"
#include "tests/support/temp_dir.h"

namespace torus::kube {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace res = resources;

// Fails fast: a refused request is the expected outcome in several tests, and retries would only slow them.
ClientOptions no_retries() {
  ClientOptions o;
  o.max_retries = 0;
  o.timeout = 10s;
  return o;
}

class KubeClientTls : public ::testing::Test {
 protected:
  void SetUp() override {
    standin::ServerOptions options;
    options.tls = tls_;
    options.authentication = standin::ServerOptions::Authentication::kRequired;
    options.tokens = {"token-a"};
    server_ = std::make_unique<standin::ApiServer>(options);
    server_->start();
  }

  // What `kubectl config view --raw` shows for a cluster entry trusting the stand-in's CA.
  std::string cluster_yaml(const std::string& ca_pem) const {
    return "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server_->url() +
           "\n    certificate-authority-data: " + torus::base64_encode(ca_pem) +
           "\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user:\n";
  }
  ClusterConfig kubeconfig_with_user(const std::string& user_yaml, const std::string& ca_pem = "") {
    return load_kubeconfig(
        tmp_.write("kubeconfig", cluster_yaml(ca_pem.empty() ? tls_.ca_cert_pem : ca_pem) + user_yaml));
  }

  // An exec plugin that prints `credential` (rewritable between calls) and counts its runs.
  std::string exec_user_yaml() const {
    return "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args:\n"
           "      - -c\n      - cat '" +
           tmp_.file("credential.json") + "'; echo run >> '" + tmp_.file("runs") + "'\n";
  }
  void write_credential(const json& status) const {
    tmp_.write(
        "credential.json",
        json{{"apiVersion", "client.authentication.k8s.io/v1"}, {"kind", "ExecCredential"}, {"status", status}}.dump());
  }
  int plugin_runs() const {
    std::ifstream in(tmp_.file("runs"));
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }

  static size_t node_count(Client& client) { return client.list(res::kNodes, "").value("items", json::array()).size(); }

  static int status_of_list(Client& client) {
    try {
      client.list(res::kConfigMaps, "default");
      return 200;
    } catch (const ApiError& e) {
      return e.status();
    }
  }

  inline static const standin::TlsMaterial tls_ = standin::make_tls_material();
  test::TempDir tmp_{"torus-kube-tls"};
  std::unique_ptr<standin::ApiServer> server_;
};

TEST_F(KubeClientTls, TheKubeconfigTheStandinWritesTrustsItsCaAndAuthenticates) {
  Client client(load_kubeconfig(server_->write_kubeconfig(tmp_.file("kubeconfig"))), no_retries());
  EXPECT_EQ(client.config().server.rfind("https://127.0.0.1:", 0), 0u) << client.config().server;
  EXPECT_EQ(status_of_list(client), 200);
  client.create(res::kConfigMaps, "default", {{"metadata", {{"name", "over-tls"}}}, {"data", {{"k", "v"}}}});
  EXPECT_EQ(client.get(res::kConfigMaps, "default", "over-tls")["data"]["k"], "v");
}

TEST_F(KubeClientTls, CreateUnreadCreatesWithTheResourcesKindAndThrowsAsCreateDoes) {
  Client client(load_kubeconfig(server_->write_kubeconfig(tmp_.file("kubeconfig"))), no_retries());
  // Without apiVersion/kind (set from the resource), and with them already set (sent as is).
  client.create_unread(res::kConfigMaps, "default", {{"metadata", {{"name", "bare"}}}, {"data", {{"k", "1"}}}});
  client.create_unread(res::kConfigMaps, "default",
                       {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "typed"}}}});
  const json bare = client.get(res::kConfigMaps, "default", "bare");
  EXPECT_EQ(bare["data"]["k"], "1");
  EXPECT_EQ(bare.value("kind", ""), "ConfigMap");
  EXPECT_EQ(client.get(res::kConfigMaps, "default", "typed")["metadata"]["name"], "typed");
  try {
    client.create_unread(res::kConfigMaps, "default", {{"metadata", {{"name", "bare"}}}});
    ADD_FAILURE() << "a second create of the same name must throw";
  } catch (const ApiError& e) {
    EXPECT_TRUE(e.already_exists()) << e.what();
  }
}

TEST_F(KubeClientTls, AWatchStreamsOverTls) {
  Client client(load_kubeconfig(server_->write_kubeconfig(tmp_.file("kubeconfig"))), no_retries());
  const std::string from = client.list(res::kConfigMaps, "default")["metadata"]["resourceVersion"];
  std::mutex mu;
  std::condition_variable seen_cv;
  std::string seen;
  StreamCancel cancel;
  std::thread watcher([&] {
    client.watch(
        res::kConfigMaps, "default", {.resource_version = from, .timeout = 30s},
        [&](const WatchEvent& e) {
          if (e.type != "ADDED") return;
          std::lock_guard lock(mu);
          seen = e.object["metadata"]["name"];
          seen_cv.notify_all();
        },
        cancel);
  });
  client.create(res::kConfigMaps, "default", {{"metadata", {{"name", "watched"}}}});
  {
    std::unique_lock lock(mu);
    EXPECT_TRUE(seen_cv.wait_for(lock, 20s, [&] { return !seen.empty(); }));
    EXPECT_EQ(seen, "watched");
  }
  cancel.cancel();
  watcher.join();
}

TEST_F(KubeClientTls, NoCredentialsOrAWrongTokenAre401) {
  Client anonymous(kubeconfig_with_user("    {}\n"), no_retries());
  EXPECT_EQ(status_of_list(anonymous), 401);
  Client wrong(kubeconfig_with_user("    token: token-z\n"), no_retries());
  EXPECT_EQ(status_of_list(wrong), 401);
  try {
    wrong.get(res::kNodes, "", "node-0");
    FAIL() << "expected ApiError";
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("401 Unauthorized"), std::string::npos) << e.what();
  }
}

TEST_F(KubeClientTls, AClientCertificateFromTheKubeconfigAuthenticates) {
  Client client(kubeconfig_with_user("    client-certificate-data: " + torus::base64_encode(tls_.client_cert_pem) +
                                     "\n    client-key-data: " + torus::base64_encode(tls_.client_key_pem) + "\n"),
                no_retries());
  EXPECT_EQ(status_of_list(client), 200);
}

// client-go's exec plugins may answer with a certificate instead of a token (e.g. cloud IAM plugins).
TEST_F(KubeClientTls, AnExecPluginsClientCertificateAuthenticates) {
  write_credential({{"clientCertificateData", tls_.client_cert_pem}, {"clientKeyData", tls_.client_key_pem}});
  Client client(kubeconfig_with_user(exec_user_yaml()), no_retries());
  EXPECT_EQ(status_of_list(client), 200);
  EXPECT_EQ(status_of_list(client), 200);
  EXPECT_EQ(plugin_runs(), 1) << "a credential without expiry is reused";
}

TEST_F(KubeClientTls, AnExecPluginIsAskedAgainWhenTheServerStopsAcceptingItsToken) {
  write_credential({{"token", "token-a"}});
  Client client(kubeconfig_with_user(exec_user_yaml()), no_retries());
  EXPECT_EQ(status_of_list(client), 200);
  server_->set_tokens({"token-b"});  // the old credential expired on the server's side
  write_credential({{"token", "token-b"}});
  EXPECT_EQ(status_of_list(client), 200);
  EXPECT_EQ(plugin_runs(), 2);
}

TEST_F(KubeClientTls, AnExpiredExecCredentialIsRenewedBeforeTheRequestAndAFreshOneIsKept) {
  const auto past = std::chrono::system_clock::now() - 1h;
  write_credential({{"token", "token-a"}, {"expirationTimestamp", format_rfc3339(past)}});
  Client expiring(kubeconfig_with_user(exec_user_yaml()), no_retries());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(status_of_list(expiring), 200);
  EXPECT_EQ(plugin_runs(), 4) << "construction, then once before each request";

  const auto future = std::chrono::system_clock::now() + 1h;
  write_credential({{"token", "token-a"}, {"expirationTimestamp", format_rfc3339(future)}});
  Client fresh(kubeconfig_with_user(exec_user_yaml()), no_retries());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(status_of_list(fresh), 200);
  EXPECT_EQ(plugin_runs(), 5);
}

TEST_F(KubeClientTls, AnExecPluginAnswerThatIsNotACredentialNamesThePlugin) {
  tmp_.write("credential.json", R"({"kind": "ExecCredential", "status": {"expirationTimestamp": "tomorrow"}})");
  try {
    Client client(kubeconfig_with_user(exec_user_yaml()), no_retries());
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("exec plugin '/bin/sh'"), std::string::npos) << e.what();
  }
  write_credential({{"token", "token-a"}, {"expirationTimestamp", "tomorrow"}});
  try {
    Client client(kubeconfig_with_user(exec_user_yaml()), no_retries());
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("status.expirationTimestamp"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"tomorrow\""), std::string::npos) << e.what();
  }
}

// What the operator's pod uses: KUBERNETES_SERVICE_HOST/PORT (an IP address, so the certificate's IP SAN is what
// is checked) and the service account's token, CA and namespace. The projected token rotates: re-read on 401.
TEST_F(KubeClientTls, InClusterConfigConnectsAndARotatedServiceAccountTokenIsReadAgainOn401) {
  const test::TempDir sa("torus-kube-tls-sa");
  sa.write("token", "token-a\n");
  sa.write("ca.crt", tls_.ca_cert_pem);
  sa.write("namespace", "torus-system\n");
  ::setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", std::to_string(server_->port()).c_str(), 1);
  const ClusterConfig config = load_in_cluster(sa.str());
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  EXPECT_EQ(config.server, server_->url());
  EXPECT_EQ(config.namespace_, "torus-system");
  Client client(config, no_retries());
  EXPECT_EQ(status_of_list(client), 200);
  server_->set_tokens({"token-b"});
  sa.write("token", "token-b\n");  // the kubelet refreshed the projected token
  EXPECT_EQ(status_of_list(client), 200);
}

TEST_F(KubeClientTls, AServerCertificateNoTrustedCaSignedIsAConnectionErrorSayingSo) {
  const standin::TlsMaterial stranger = standin::make_tls_material();
  Client client(kubeconfig_with_user("    token: token-a\n", stranger.ca_cert_pem), no_retries());
  try {
    client.list(res::kNodes, "");
    FAIL() << "expected ConnectionError";
  } catch (const ConnectionError& e) {
    EXPECT_NE(std::string(e.what()).find(server_->url()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(server certificate rejected: "), std::string::npos) << e.what();
  }
}

// Only a certificate issued for the address in the kubeconfig will do (RFC 2818, IP SANs included).
TEST(KubeClientTlsHost, AServerCertificateForAnotherHostIsAConnectionErrorSayingSo) {
  standin::ServerOptions options;
  options.tls = standin::make_tls_material({.server_ips = {"10.0.0.1"}, .server_dns = {"api.example.invalid"}});
  standin::ApiServer server(options);
  server.start();
  const test::TempDir tmp("torus-kube-tls-host");
  Client client(load_kubeconfig(server.write_kubeconfig(tmp.file("kubeconfig"))), no_retries());
  try {
    client.list(res::kNodes, "");
    FAIL() << "expected ConnectionError";
  } catch (const ConnectionError& e) {
    EXPECT_NE(std::string(e.what()).find("does not name this host"), std::string::npos) << e.what();
  }
}

TEST_F(KubeClientTls, InsecureSkipTlsVerifyConnectsWithoutTheCa) {
  const std::string yaml =
      "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server_->url() +
      "\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context: {cluster: c, user: "
      "u}\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: token-a\n";
  Client client(load_kubeconfig(tmp_.write("kubeconfig", yaml)), no_retries());
  EXPECT_EQ(node_count(client), 0u);  // no simulated kubelet here: the cluster has no nodes
}

}  // namespace
}  // namespace torus::kube
