#include "operator/kube/config.h"

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/process/supervisor.h"
#include "common/util/base64.h"
#include "common/util/env.h"
#include "common/util/error.h"
#include "common/util/rfc3339.h"

namespace torus::kube {
namespace {

namespace fs = std::filesystem;
constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

std::string read_file(const fs::path& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument(what + ": cannot read file '" + path.string() + "'");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string scalar(const YAML::Node& map, const char* key) {
  if (!map.IsMap()) return "";
  YAML::Node v = map[key];
  return v && v.IsScalar() ? v.as<std::string>() : "";
}

// The entry of `list` (a kubeconfig "clusters"/"users"/"contexts" array) named `name`, under `inner`.
YAML::Node named_entry(const YAML::Node& root, const char* list, const std::string& name, const char* inner,
                       const std::string& file) {
  YAML::Node entries = root.IsMap() ? root[list] : YAML::Node();
  if (entries && entries.IsSequence()) {
    for (const auto& e : entries) {
      if (scalar(e, "name") == name && e[inner] && e[inner].IsMap()) return e[inner];
    }
  }
  throw InvalidArgument(file + ": " + list + ": no entry named '" + name + "' with a '" + inner + "' map");
}

// A "<x>-data" (base64) or "<x>" (file path) pair of a kubeconfig entry, as PEM text.
std::string data_or_file(const YAML::Node& entry, const std::string& key, const fs::path& base,
                         const std::string& where) {
  std::string data = scalar(entry, (key + "-data").c_str());
  if (!data.empty()) return base64_decode(data, where + "." + key + "-data");
  std::string file = scalar(entry, key.c_str());
  if (file.empty()) return "";
  fs::path p(file);
  if (p.is_relative()) p = base / p;
  return read_file(p, where + "." + key);
}

ExecPlugin parse_exec(const YAML::Node& exec, const std::string& where) {
  ExecPlugin plugin;
  plugin.command = scalar(exec, "command");
  if (plugin.command.empty()) throw InvalidArgument(where + ".exec.command: must name the plugin to run");
  if (std::string v = scalar(exec, "apiVersion"); !v.empty()) plugin.api_version = v;
  if (exec["args"] && exec["args"].IsSequence()) {
    for (const auto& a : exec["args"]) plugin.args.push_back(a.as<std::string>());
  }
  if (exec["env"] && exec["env"].IsSequence()) {
    for (const auto& e : exec["env"]) plugin.env.emplace_back(scalar(e, "name"), scalar(e, "value"));
  }
  return plugin;
}

void apply_user(ClusterConfig& cfg, const YAML::Node& user, const fs::path& base, const std::string& where) {
  cfg.client_cert_pem = data_or_file(user, "client-certificate", base, where);
  cfg.client_key_pem = data_or_file(user, "client-key", base, where);
  cfg.bearer_token = scalar(user, "token");
  if (std::string tf = scalar(user, "tokenFile"); !tf.empty()) {
    fs::path p(tf);
    cfg.token_file = (p.is_relative() ? base / p : p).string();
    cfg.bearer_token = trim(read_file(cfg.token_file, where + ".tokenFile"));
  }
  if (user["exec"] && user["exec"].IsMap()) cfg.exec = parse_exec(user["exec"], where);
}

YAML::Node load_yaml(const std::string& path) {
  std::string text = read_file(path, "kubeconfig");
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InvalidArgument(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                          ": malformed YAML: " + e.msg);
  }
}

}  // namespace

std::string read_token_file(const std::string& path) { return trim(read_file(path, "bearer token file")); }

ClusterConfig load_in_cluster(const std::string& sa_dir) {
  fs::path dir = sa_dir.empty() ? fs::path(kServiceAccountDir) : fs::path(sa_dir);
  auto host = env::get("KUBERNETES_SERVICE_HOST");
  auto port = env::get("KUBERNETES_SERVICE_PORT");
  if (!host || !port) {
    throw InvalidArgument("in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  ClusterConfig cfg;
  // An IPv6 service address needs brackets in a URL.
  std::string h = host->find(':') != std::string::npos ? "[" + *host + "]" : *host;
  cfg.server = "https://" + h + ":" + *port;
  cfg.token_file = (dir / "token").string();
  cfg.bearer_token = trim(read_file(cfg.token_file, "in-cluster service-account token"));
  cfg.ca_pem = read_file(dir / "ca.crt", "in-cluster service-account CA");
  if (fs::exists(dir / "namespace")) cfg.namespace_ = trim(read_file(dir / "namespace", "in-cluster namespace"));
  return cfg;
}

ClusterConfig load_kubeconfig(const std::string& path, const std::string& context) {
  YAML::Node root = load_yaml(path);
  if (!root.IsMap()) throw InvalidArgument(path + ": must be a kubeconfig map (apiVersion, clusters, users...)");
  fs::path base = fs::absolute(path).parent_path();
  std::string ctx_name = context.empty() ? scalar(root, "current-context") : context;
  if (ctx_name.empty()) throw InvalidArgument(path + ": current-context: must name a context, got none");
  YAML::Node ctx = named_entry(root, "contexts", ctx_name, "context", path);
  std::string cluster_name = scalar(ctx, "cluster");
  YAML::Node cluster = named_entry(root, "clusters", cluster_name, "cluster", path);

  ClusterConfig cfg;
  cfg.server = scalar(cluster, "server");
  if (cfg.server.empty()) throw InvalidArgument(path + ": clusters[" + cluster_name + "].server: must be a URL");
  while (!cfg.server.empty() && cfg.server.back() == '/') cfg.server.pop_back();
  cfg.ca_pem = data_or_file(cluster, "certificate-authority", base, path + ": clusters[" + cluster_name + "]");
  if (scalar(cluster, "insecure-skip-tls-verify") == "true") cfg.tls_verify = TlsVerify::kInsecureSkip;
  cfg.namespace_ = scalar(ctx, "namespace");
  if (std::string user_name = scalar(ctx, "user"); !user_name.empty()) {
    apply_user(cfg, named_entry(root, "users", user_name, "user", path), base, path + ": users[" + user_name + "]");
  }
  return cfg;
}

ClusterConfig load_default(const std::string& kubeconfig_flag) {
  if (!kubeconfig_flag.empty()) return load_kubeconfig(kubeconfig_flag);
  if (auto kc = env::get("KUBECONFIG"); kc && !kc->empty()) return load_kubeconfig(kc->substr(0, kc->find(':')));
  if (env::get("KUBERNETES_SERVICE_HOST")) return load_in_cluster();
  auto home = env::get("HOME");
  return load_kubeconfig((home ? *home : std::string(".")) + "/.kube/config");
}

ExecCredential parse_exec_credential(const std::string& json_text, const std::string& command) {
  auto doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("status") || !doc["status"].is_object()) {
    throw InvalidArgument("exec plugin '" + command + "': expected an ExecCredential JSON with a status object");
  }
  const auto& st = doc["status"];
  ExecCredential cred;
  cred.token = st.value("token", "");
  cred.client_cert_pem = st.value("clientCertificateData", "");
  cred.client_key_pem = st.value("clientKeyData", "");
  if (!cred.client_cert_pem.empty() && cred.client_key_pem.empty()) {
    throw InvalidArgument("exec plugin '" + command + "': status.clientCertificateData comes without clientKeyData");
  }
  if (std::string expiry = st.value("expirationTimestamp", ""); !expiry.empty()) {
    cred.expires = parse_rfc3339(expiry);
    if (!cred.expires) {
      throw InvalidArgument(
          "exec plugin '" + command +
          "': status.expirationTimestamp: expected an RFC 3339 time like 2026-11-22T06:00:00Z, got \"" + expiry + "\"");
    }
  }
  if (cred.token.empty() && cred.client_cert_pem.empty()) {
    throw InvalidArgument("exec plugin '" + command + "': status has neither token nor clientCertificateData");
  }
  return cred;
}

ExecCredential run_exec_plugin(const ExecPlugin& plugin) {
  std::string out;
  process::Supervisor sup([&](size_t, process::Stream stream, std::string_view line) {
    if (stream == process::Stream::kStdout) out.append(line).push_back('\n');
  });
  process::ProcessSpec spec{"exec plugin", {plugin.command}, {}};
  spec.argv.insert(spec.argv.end(), plugin.args.begin(), plugin.args.end());
  for (const auto& [k, v] : plugin.env) spec.env[k] = v;
  nlohmann::json info = {
      {"apiVersion", plugin.api_version}, {"kind", "ExecCredential"}, {"spec", {{"interactive", false}}}};
  spec.env["KUBERNETES_EXEC_INFO"] = info.dump();
  sup.start(spec);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::optional<process::Termination> t;
  while (!t && std::chrono::steady_clock::now() < deadline) t = sup.wait_any(std::chrono::milliseconds(500));
  if (!t) throw Timeout("exec plugin '" + plugin.command + "': no answer within 30 s");
  if (!t->success()) throw SystemError("exec plugin '" + plugin.command + "': " + t->describe());
  return parse_exec_credential(out, plugin.command);
}

std::string base64_decode(const std::string& text, const std::string& field) {
  std::string clean;  // kubeconfigs may wrap long values
  for (char c : text) {
    if (c != '\n' && c != '\r' && c != ' ') clean.push_back(c);
  }
  std::optional<std::string> decoded = torus::base64_decode(clean);
  if (!decoded) {
    throw InvalidArgument(field + ": must be base64 (the alphabet, '=' padding, length a multiple of 4), got " +
                          std::to_string(clean.size()) + " characters that are not");
  }
  return *decoded;
}

}  // namespace torus::kube
