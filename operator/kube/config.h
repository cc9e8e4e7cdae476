#pragma once
// Where the Kubernetes API is and how to authenticate: in-cluster (service account) or a kubeconfig file.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace torus::kube {

enum class TlsVerify { kVerify, kInsecureSkip };

// An exec credential plugin (client.authentication.k8s.io): a command that prints an ExecCredential.
struct ExecPlugin {
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string api_version = "client.authentication.k8s.io/v1";
};

// Everything the HTTP transport needs. PEM strings hold the file contents, never paths.
struct ClusterConfig {
  std::string server;  // e.g. https://10.0.0.1:443 or http://127.0.0.1:8001
  std::string ca_pem;
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string bearer_token;
  std::string token_file;  // re-read on refresh (service-account tokens rotate)
  std::optional<ExecPlugin> exec;
  TlsVerify tls_verify = TlsVerify::kVerify;
  std::string namespace_;  // the context's or the pod's namespace ("" when none)
};

// The service-account token, CA and KUBERNETES_SERVICE_HOST/PORT of a pod. `sa_dir` defaults to
// /var/run/secrets/kubernetes.io/serviceaccount. Throws InvalidArgument naming what is missing.
ClusterConfig load_in_cluster(const std::string& sa_dir = "");

// The current context (or `context` when given) of a kubeconfig file. Relative file paths in it are resolved
// against the kubeconfig's folder. Throws InvalidArgument naming the file and the field at fault.
ClusterConfig load_kubeconfig(const std::string& path, const std::string& context = "");

// `--kubeconfig` if given, else $KUBECONFIG (first entry), else in-cluster when KUBERNETES_SERVICE_HOST is set,
// else ~/.kube/config.
ClusterConfig load_default(const std::string& kubeconfig_flag);

// A bearer token file's contents without the trailing newline (service-account tokens rotate: re-read on 401).
std::string read_token_file(const std::string& path);

// Result of running an exec plugin: a token and/or a client certificate (PEM), and when to ask again.
struct ExecCredential {
  std::string token;
  std::string client_cert_pem;
  std::string client_key_pem;
  std::optional<std::chrono::system_clock::time_point> expires;  // status.expirationTimestamp
};
// Runs the plugin and parses its ExecCredential JSON; throws InvalidArgument / SystemError naming the command.
ExecCredential run_exec_plugin(const ExecPlugin& plugin);
// Parses ExecCredential JSON printed by a plugin (exposed for tests).
ExecCredential parse_exec_credential(const std::string& json_text, const std::string& command);

// A kubeconfig *-data field (common/util/base64.h; line breaks ignored). Throws InvalidArgument naming `field`.
std::string base64_decode(const std::string& text, const std::string& field);

}  // namespace torus::kube
