// Kubernetes client configuration: kubeconfig contexts, credentials, in-cluster files, exec plugins.
#include "operator/kube/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "common/util/base64.h"
#include "common/util/error.h"
#include "operator/kube/client.h"
#include "tests/support/temp_dir.h"

namespace torus::kube {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

const char* kKubeconfig = R"(apiVersion: v1
kind: Config
current-context: dev
contexts:
- name: dev
  context: {cluster: c1, user: u1, namespace: team}
- name: prod
  context: {cluster: c2, user: u2}
clusters:
- name: c1
  cluster: {server: "https://10.0.0.1:6443/", certificate-authority-data: "Q0EtUEVN"}
- name: c2
  cluster: {server: "http://127.0.0.1:8001", insecure-skip-tls-verify: true}
users:
- name: u1
  user: {token: abc123, client-certificate-data: "Q0VSVA==", client-key: key.pem}
- name: u2
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /bin/sh
      args: ["-c", "echo '{\"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-plugin\"}}'"]
)";

TEST(Kubeconfig, CurrentContext) {
  TempDir dir;
  dir.write("key.pem", "KEY");
  ClusterConfig c = load_kubeconfig(dir.write("config", kKubeconfig));
  EXPECT_EQ(c.server, "https://10.0.0.1:6443");
  EXPECT_EQ(c.ca_pem, "CA-PEM");
  EXPECT_EQ(c.bearer_token, "abc123");
  EXPECT_EQ(c.client_cert_pem, "CERT");
  EXPECT_EQ(c.client_key_pem, "KEY") << "relative paths resolve against the kubeconfig's folder";
  EXPECT_EQ(c.namespace_, "team");
  EXPECT_EQ(c.tls_verify, TlsVerify::kVerify);
}

TEST(Kubeconfig, NamedContextWithExecPlugin) {
  TempDir dir;
  ClusterConfig c = load_kubeconfig(dir.write("config", kKubeconfig), "prod");
  EXPECT_EQ(c.tls_verify, TlsVerify::kInsecureSkip);
  ASSERT_TRUE(c.exec);
  EXPECT_EQ(run_exec_plugin(*c.exec).token, "from-plugin");
  Client client(c, ClientOptions{});  // fetches the token through the plugin at construction
  SUCCEED();
}

TEST(Kubeconfig, ErrorsNameTheField) {
  TempDir dir;
  std::string file = dir.write("config", "apiVersion: v1\ncurrent-context: nope\ncontexts: []\n");
  try {
    load_kubeconfig(file);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("contexts: no entry named 'nope'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_kubeconfig(dir.write("bad", "a: [unclosed\n")), InvalidArgument);
  EXPECT_THROW(load_kubeconfig("/nonexistent/kubeconfig"), InvalidArgument);
}

TEST(InCluster, ReadsServiceAccountFiles) {
  TempDir dir;
  dir.write("token", "sa-token\n");
  dir.write("ca.crt", "CA");
  std::string ns_file = dir.write("namespace", "torus-system");
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  ClusterConfig c = load_in_cluster(fs::path(ns_file).parent_path().string());
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  EXPECT_EQ(c.server, "https://10.96.0.1:443");
  EXPECT_EQ(c.bearer_token, "sa-token");
  EXPECT_EQ(c.ca_pem, "CA");
  EXPECT_EQ(c.namespace_, "torus-system");
}

TEST(InCluster, MissingEnvironmentIsAnError) {
  unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_THROW(load_in_cluster("/nonexistent"), InvalidArgument);
}

TEST(Base64, RoundTripAndErrors) {
  for (const std::string& s : std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff", 2)}) {
    EXPECT_EQ(base64_decode(torus::base64_encode(s), "f"), s);
  }
  EXPECT_THROW(base64_decode("abc", "users[u].client-key-data"), InvalidArgument);
}

TEST(ExecCredential, RejectsMalformedOutput) {
  EXPECT_THROW(parse_exec_credential("not json", "plugin"), InvalidArgument);
  EXPECT_THROW(parse_exec_credential(R"({"status":{}})", "plugin"), InvalidArgument);
}

TEST(Paths, ResourcePaths) {
  EXPECT_EQ(resources::kPods.object_path("ns", "p"), "/api/v1/namespaces/ns/pods/p");
  EXPECT_EQ(resources::kTrainingJobs.collection_path(""), "/apis/torus.dev/v1alpha1/trainingjobs");
  EXPECT_EQ(url_escape("a=b,c"), "a%3Db%2Cc");
}

}  // namespace
}  // namespace torus::kube
