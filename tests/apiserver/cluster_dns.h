#pragma once
// The cluster's DNS as the stand-in answers it, after Kubernetes' "DNS for Services and Pods" and the EndpointSlice
// controller: a name resolves only through a headless Service. For each headless Service (clusterIP None, with a
// selector) and each pod of its namespace that the selector matches and that belongs in its endpoints (an IP, not
// terminal, not terminating; ready, unless the Service publishes not-ready addresses):
//   <service>.<ns>.svc.cluster.local            -> the pod's IP
//   <hostname>.<service>.<ns>.svc.cluster.local -> the pod's IP, when spec.hostname is set and spec.subdomain is
//                                                  the Service's name.
// The process kubelet writes these records into each pod's /etc/hosts (kept current while the pod runs) with the
// short forms the pod's resolv.conf search list would complete (<name>.<ns>.svc, and <name> within its namespace),
// next to the kubelet's own lines for the pod. Nothing else resolves: no Service, a selector that does not match, or
// a pod not ready behind a Service that does not publish it, and the name is unknown to the pod, as in a cluster.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/apiserver/store.h"

namespace torus::standin {

struct DnsRecord {
  std::string ns;    // the Service's namespace
  std::string name;  // relative to <ns>.svc.cluster.local: "job" or "job-worker-0.job"
  std::string ip;
};

// Every record the cluster's DNS serves now, in a stable order (namespace, Service, pod name).
std::vector<DnsRecord> cluster_dns_records(const Store& store);

// Whether `pod` is among the endpoints of a Service that does (or does not) publish not-ready addresses: the
// EndpointSlice controller's ShouldPodBeInEndpoints and its readiness rule.
bool serves_endpoint(const nlohmann::json& pod, bool publish_not_ready);

// The pod's /etc/hosts: localhost, the pod's own name (as the kubelet writes it: its FQDN when it has a subdomain),
// then every record with the names the pod's search list completes.
std::string hosts_file(const std::vector<DnsRecord>& records, const nlohmann::json& pod);

// The pod's host name: spec.hostname, else its name (at most 63 characters, as the kubelet truncates it).
std::string pod_hostname(const nlohmann::json& pod);

}  // namespace torus::standin
