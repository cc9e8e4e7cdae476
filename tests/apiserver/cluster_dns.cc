#include "tests/apiserver/cluster_dns.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace torus::standin {
namespace {

using json = nlohmann::json;

bool has_condition(const json& pod, const std::string& type) {
  for (const json& c : pod.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == type) return c.value("status", "") == "True";
  }
  return false;
}

// A Service selects by equality on every key of its selector; an empty selector selects nothing (its endpoints are
// managed by hand, which nothing here does).
bool selects(const json& selector, const json& pod) {
  if (!selector.is_object() || selector.empty()) return false;
  const json labels = pod["metadata"].value("labels", json::object());
  for (const auto& [key, value] : selector.items()) {
    if (!labels.contains(key) || labels[key] != value) return false;
  }
  return true;
}

std::vector<ObjectPtr> all(const Store& store, const char* resource) {
  return store.list(*store.registry().find("", "v1", resource), "").items;
}

}  // namespace

bool serves_endpoint(const json& pod, bool publish_not_ready) {
  const json status = pod.value("status", json::object());
  const std::string phase = status.value("phase", "Pending");
  if (phase == "Succeeded" || phase == "Failed") return false;
  if (status.value("podIP", "").empty()) return false;
  if (pod["metadata"].contains("deletionTimestamp") && !publish_not_ready) return false;
  return publish_not_ready || has_condition(pod, "Ready");
}

std::vector<DnsRecord> cluster_dns_records(const Store& store) {
  std::map<std::string, std::vector<ObjectPtr>> pods_by_ns;
  for (const ObjectPtr& p : all(store, "pods")) pods_by_ns[(*p)["metadata"].value("namespace", "")].push_back(p);
  std::vector<DnsRecord> out;
  for (const ObjectPtr& s : all(store, "services")) {
    const json& meta = (*s)["metadata"];
    const json spec = s->value("spec", json::object());
    if (spec.value("clusterIP", "") != "None") continue;  // a ClusterIP Service's name is a virtual IP we do not serve
    const std::string ns = meta.value("namespace", "");
    const std::string service = meta.value("name", "");
    const bool publish = spec.value("publishNotReadyAddresses", false);
    for (const ObjectPtr& p : pods_by_ns[ns]) {
      const json& pod = *p;
      if (!selects(spec.value("selector", json::object()), pod) || !serves_endpoint(pod, publish)) continue;
      const std::string ip = pod["status"].value("podIP", "");
      out.push_back({ns, service, ip});
      const json& pod_spec = pod["spec"];
      const std::string hostname = pod_spec.value("hostname", "");
      if (!hostname.empty() && pod_spec.value("subdomain", "") == service)
        out.push_back({ns, hostname + "." + service, ip});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const DnsRecord& a, const DnsRecord& b) {
    return std::tie(a.ns, a.name) < std::tie(b.ns, b.name);
  });
  return out;
}

std::string pod_hostname(const json& pod) {
  std::string name = pod["spec"].value("hostname", "");
  if (name.empty()) name = pod["metadata"].value("name", "");
  return name.substr(0, 63);
}

std::string hosts_file(const std::vector<DnsRecord>& records, const json& pod) {
  const std::string ns = pod["metadata"].value("namespace", "default");
  const std::string ip = pod.value("status", json::object()).value("podIP", "");
  const std::string hostname = pod_hostname(pod);
  const std::string subdomain = pod["spec"].value("subdomain", "");
  std::string out =
      "# Kubernetes-managed hosts file (the stand-in's process kubelet, with the cluster DNS's records).\n"
      "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
  if (!ip.empty()) {
    out += ip + "\t";
    if (!subdomain.empty()) out += hostname + "." + subdomain + "." + ns + ".svc.cluster.local\t";
    out += hostname + "\n";
  }
  out += "# cluster DNS\n";
  for (const DnsRecord& r : records) {
    // The search list <ns>.svc.cluster.local svc.cluster.local cluster.local completes these short forms.
    out +=
        r.ip + "\t" + r.name + "." + r.ns + ".svc.cluster.local " + r.name + "." + r.ns + ".svc " + r.name + "." + r.ns;
    if (r.ns == ns) out += " " + r.name;
    out += "\n";
  }
  return out;
}

}  // namespace torus::standin
