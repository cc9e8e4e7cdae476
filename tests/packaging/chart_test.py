#!/usr/bin/python3
"""Renders charts/torus-operator with the official Helm library (PyPI helm-python-sdk, which binds Helm's Go SDK)
for the default values and several non-default sets, and checks what comes out.

Run by tests/packaging/packaging_test.cc; standalone: /usr/bin/python3 tests/packaging/chart_test.py
"""
import json
import pathlib
import re
import sys
import unittest

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "torus-operator"
RELEASE = "torus"
NAMESPACE = "torus-system"

try:
    import helm_python as helm
except ImportError as e:  # the package is installed by scripts/lib.sh; say so instead of a bare traceback
    sys.exit(f"chart_test: cannot import helm_python ({e}); install it with "
             "`/usr/bin/python3 -m pip install --break-system-packages helm-python-sdk==0.2.2`")


def render(values=None):
    """All rendered documents, as a list of dicts (NOTES.txt and empty templates dropped)."""
    chart = helm.Chart.load(str(CHART))
    manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    docs = []
    for path, text in sorted(manifests.items()):
        if not path.endswith(".yaml"):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def notes(values=None):
    chart = helm.Chart.load(str(CHART))
    manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    return next(text for path, text in manifests.items() if path.endswith("NOTES.txt"))


def kinds(docs):
    return sorted(d["kind"] for d in docs)


def one(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def rules_by_resource(role):
    """{(apiGroup, resource): set(verbs)} of a Role or ClusterRole."""
    table = {}
    for rule in role["rules"]:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                table.setdefault((group, resource), set()).update(rule["verbs"])
    return table


# What the operator does, and nothing more (see templates/rbac.yaml).
EXPECTED_JOB_RULES = {
    ("torus.dev", "trainingjobs"): {"get", "list", "watch", "patch", "delete"},  # delete: ttlSecondsAfterFinished
    ("torus.dev", "trainingjobs/status"): {"get", "update", "patch"},
    ("", "pods"): {"get", "list", "watch", "create", "delete"},
    ("", "services"): {"get", "list", "watch", "create", "delete"},
    ("", "configmaps"): {"get", "list", "watch", "create", "update", "delete"},  # update: the node -> rack map
    ("", "secrets"): {"get", "list", "watch", "create", "delete"},
    ("", "events"): {"create", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
    # A gang's PodGroup (schedulingPolicy.schedulerName): created with the job, deleted with it by the garbage collector.
    ("scheduling.x-k8s.io", "podgroups"): {"create"},
    ("scheduling.volcano.sh", "podgroups"): {"create"},
    # training.checkpoint.volumeClaimTemplate's claim: created once, deleted with the job by the garbage collector.
    ("", "persistentvolumeclaims"): {"create"},
}
EXPECTED_LEASE_RULES = {("coordination.k8s.io", "leases"): {"get", "create", "update"}}
# Nodes are cluster-scoped: read for rack ordering (runPolicy.topology.key), always through a ClusterRole.
EXPECTED_NODE_RULES = {("", "nodes"): {"get", "list", "watch"}}


class SourceCopies(unittest.TestCase):
    """Files the chart carries as copies (Helm reads only its own tree) must equal their sources."""

    def test_crd_is_identical_to_crds_folder(self):
        source = ROOT / "crds" / "trainingjobs.torus.dev.yaml"
        copy = CHART / "crds" / "trainingjobs.torus.dev.yaml"
        self.assertTrue(source.exists(), f"{source} is missing: the CRD is written by the API area")
        self.assertTrue(copy.exists(), f"{copy} is missing: copy {source} there")
        self.assertEqual(copy.read_bytes(), source.read_bytes(),
                         f"{copy} differs from {source}: copy it again (cp {source} {copy})")
        crds = helm.Chart.load(str(CHART)).crds
        self.assertEqual([c["name"] for c in crds], ["crds/trainingjobs.torus.dev.yaml"])

    def test_rules_and_dashboards_are_identical_to_their_sources(self):
        pairs = [(ROOT / "dashboards" / "alerts" / "torus-rules.yaml", CHART / "files" / "torus-rules.yaml")]
        for source in sorted((ROOT / "dashboards").glob("*.json")):
            pairs.append((source, CHART / "files" / "dashboards" / source.name))
        copies = sorted((CHART / "files" / "dashboards").glob("*.json"))
        self.assertEqual([p.name for p in copies], [s.name for s, _ in pairs[1:]], "dashboard copies differ in names")
        for source, copy in pairs:
            self.assertEqual(copy.read_bytes(), source.read_bytes(),
                             f"{copy} differs from {source}: run dashboards/build_dashboards.py")


class Lint(unittest.TestCase):
    def test_strict_lint_is_clean(self):
        report = helm.lint(str(CHART), strict=True, namespace=NAMESPACE)
        self.assertEqual(report["errors"], [])
        problems = [m for m in report["messages"] if m["severity"] >= 2]
        self.assertEqual(problems, [], json.dumps(report, indent=1))


class DefaultValues(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = render()

    def test_kinds(self):
        self.assertEqual(kinds(self.docs), sorted([
            "ClusterRole", "ClusterRoleBinding", "ConfigMap", "ConfigMap", "ConfigMap", "ConfigMap", "Deployment",
            "PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount"]))

    def test_every_object_is_named_labelled_and_namespaced(self):
        for d in self.docs:
            meta = d["metadata"]
            self.assertTrue(meta.get("name"), d)
            self.assertEqual(meta["labels"]["app.kubernetes.io/instance"], RELEASE, meta["name"])
            if not d["kind"].startswith("Cluster"):
                self.assertEqual(meta.get("namespace"), NAMESPACE, f"{d['kind']} {meta['name']}")

    def test_deployment_runs_two_leader_elected_hardened_replicas(self):
        deploy = one(self.docs, "Deployment")
        self.assertEqual(deploy["spec"]["replicas"], 2)
        pod = deploy["spec"]["template"]["spec"]
        self.assertTrue(pod["securityContext"]["runAsNonRoot"])
        self.assertGreater(pod["securityContext"]["runAsUser"], 0)
        self.assertEqual(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault")
        (container,) = pod["containers"]
        self.assertEqual(container["args"][0], "operator")
        self.assertIn("--leader-elect", container["args"])
        self.assertIn("--metrics-address=0.0.0.0:8080", container["args"])
        self.assertTrue(any(a.startswith("--worker-image=ghcr.io/torus-dev/torus-worker:0.1.0")
                            for a in container["args"]), container["args"])
        # No client-side rate limit by default: the API server's Priority and Fairness protects it.
        self.assertIn("--qps=0", container["args"])
        self.assertIn("--burst=0", container["args"])
        self.assertEqual(container["image"], "ghcr.io/torus-dev/torus-operator:0.1.0")
        sc = container["securityContext"]
        self.assertTrue(sc["readOnlyRootFilesystem"])
        self.assertFalse(sc["allowPrivilegeEscalation"])
        self.assertEqual(sc["capabilities"]["drop"], ["ALL"])
        self.assertEqual(set(container["resources"]["requests"]), {"cpu", "memory"})
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        self.assertEqual(ports, {"http-metrics": 8080})
        self.assertEqual(container["livenessProbe"]["httpGet"], {"path": "/healthz", "port": "http-metrics"})
        self.assertEqual(container["readinessProbe"]["httpGet"], {"path": "/readyz", "port": "http-metrics"})
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        self.assertIn("/tmp", mounts, "a read-only root filesystem needs a writable /tmp")
        self.assertEqual(pod["serviceAccountName"], one(self.docs, "ServiceAccount")["metadata"]["name"])

    def test_service_selects_the_operator_pods_and_its_port(self):
        deploy = one(self.docs, "Deployment")
        service = one(self.docs, "Service")
        pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
        for key, value in service["spec"]["selector"].items():
            self.assertEqual(pod_labels.get(key), value, key)
        self.assertEqual(deploy["spec"]["selector"]["matchLabels"].items() <= pod_labels.items(), True)
        self.assertEqual(service["spec"]["ports"][0]["targetPort"], "http-metrics")

    def test_rbac_is_least_privilege(self):
        cluster_role = one(self.docs, "ClusterRole")
        self.assertEqual(rules_by_resource(cluster_role), EXPECTED_JOB_RULES | EXPECTED_NODE_RULES)
        lease_role = one(self.docs, "Role")
        self.assertEqual(rules_by_resource(lease_role), EXPECTED_LEASE_RULES)
        for role in (cluster_role, lease_role):
            for rule in role["rules"]:
                for field in ("apiGroups", "resources", "verbs"):
                    self.assertNotIn("*", rule.get(field, []), f"{role['metadata']['name']}: wildcard in {field}")
        sa = one(self.docs, "ServiceAccount")["metadata"]["name"]
        for binding in (one(self.docs, "ClusterRoleBinding"), one(self.docs, "RoleBinding")):
            self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}])

    def test_dashboards_are_configmaps_for_the_grafana_sidecar(self):
        maps = [d for d in self.docs if d["kind"] == "ConfigMap"]
        seen = {}
        for cm in maps:
            self.assertEqual(cm["metadata"]["labels"]["grafana_dashboard"], "1")
            ((key, text),) = cm["data"].items()
            seen[key] = json.loads(text)
        sources = {p.name: json.loads(p.read_text()) for p in (ROOT / "dashboards").glob("*.json")}
        self.assertEqual(seen, sources)

    def test_notes_tell_how_to_reach_the_operator(self):
        text = notes()
        self.assertIn("torus-system", text)
        self.assertIn("leader election on", text)
        self.assertIn("/metrics", text)


class MonitoringAndNamespacedValues(unittest.TestCase):
    VALUES = yaml.safe_load((ROOT / "tests/packaging/monitoring-values.yaml").read_text())

    @classmethod
    def setUpClass(cls):
        cls.docs = render(cls.VALUES)

    def test_kinds(self):
        self.assertEqual(kinds(self.docs), sorted([
            "ClusterRole", "ClusterRoleBinding", "ConfigMap", "ConfigMap", "ConfigMap", "ConfigMap", "Deployment",
            "PodDisruptionBudget", "PodMonitor", "PrometheusRule", "Role", "Role", "Role", "RoleBinding", "RoleBinding",
            "RoleBinding", "Service", "ServiceAccount", "ServiceMonitor"]))

    def test_namespaced_rbac_per_watched_namespace(self):
        roles = {d["metadata"]["namespace"]: d for d in self.docs
                 if d["kind"] == "Role" and not d["metadata"]["name"].endswith("-leader-election")}
        self.assertEqual(set(roles), {"team-a", "team-b"})
        for role in roles.values():
            self.assertEqual(rules_by_resource(role), EXPECTED_JOB_RULES)
        # Outside the watched namespaces the operator reads nodes and nothing else.
        self.assertEqual(rules_by_resource(one(self.docs, "ClusterRole")), EXPECTED_NODE_RULES)
        args = one(self.docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertIn("--watch-namespace=team-a", args)
        self.assertIn("--watch-namespace=team-b", args)

    def test_replicas_and_image(self):
        deploy = one(self.docs, "Deployment")
        self.assertEqual(deploy["spec"]["replicas"], 3)
        self.assertEqual(deploy["spec"]["template"]["spec"]["containers"][0]["image"],
                         "registry.example/torus-operator:1.2.3")

    def test_prometheus_rule_carries_the_plain_rules_file(self):
        rule = one(self.docs, "PrometheusRule")
        plain = yaml.safe_load((ROOT / "dashboards" / "alerts" / "torus-rules.yaml").read_text())
        self.assertEqual(rule["spec"], plain)
        self.assertEqual(rule["metadata"]["labels"]["release"], "kube-prometheus-stack")

    def test_monitors_target_the_right_pods(self):
        sm = one(self.docs, "ServiceMonitor")
        self.assertEqual(sm["spec"]["endpoints"][0]["port"], "http-metrics")
        self.assertEqual(sm["spec"]["endpoints"][0]["interval"], "15s")
        service_labels = one(self.docs, "Service")["metadata"]["labels"]
        for key, value in sm["spec"]["selector"]["matchLabels"].items():
            self.assertEqual(service_labels.get(key), value, key)
        pm = one(self.docs, "PodMonitor")
        self.assertEqual(pm["spec"]["selector"]["matchLabels"],
                         {"app.kubernetes.io/managed-by": "torus-operator", "torus.dev/role": "worker"})
        self.assertEqual(pm["spec"]["namespaceSelector"], {"matchNames": ["team-a", "team-b"]})
        endpoint = pm["spec"]["podMetricsEndpoints"][0]
        # Every local rank's port ("metrics", "metrics-1", ...), not only local rank 0's.
        self.assertNotIn("port", endpoint)
        (keep,) = endpoint["relabelings"]
        self.assertEqual((keep["sourceLabels"], keep["action"]), (["__meta_kubernetes_pod_container_port_name"], "keep"))
        for name, kept in [("metrics", True), ("metrics-1", True), ("metrics-15", True), ("rendezvous", False)]:
            self.assertEqual(re.fullmatch(keep["regex"], name) is not None, kept, name)
        self.assertTrue(endpoint["honorLabels"])

    def test_dashboards_go_to_the_grafana_namespace(self):
        for cm in (d for d in self.docs if d["kind"] == "ConfigMap"):
            self.assertEqual(cm["metadata"]["namespace"], "monitoring")


class MinimalValues(unittest.TestCase):
    VALUES = {
        "replicaCount": 1,
        "leaderElection": {"enabled": False},
        "rbac": {"create": False},
        "serviceAccount": {"create": False, "name": "existing-sa"},
        "dashboards": {"enabled": False},
    }

    def test_only_the_deployment_and_service(self):
        docs = render(self.VALUES)
        self.assertEqual(kinds(docs), ["Deployment", "Service"])
        pod = one(docs, "Deployment")["spec"]["template"]["spec"]
        self.assertEqual(pod["serviceAccountName"], "existing-sa")
        self.assertNotIn("--leader-elect", pod["containers"][0]["args"])

    def test_client_rate_limit_reaches_the_args(self):
        values = dict(self.VALUES, clientRateLimit={"qps": 20, "burst": 30})
        args = one(render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertIn("--qps=20", args)
        self.assertIn("--burst=30", args)


class RejectedValues(unittest.TestCase):
    def assert_rejected(self, values, error, *needles):
        with self.assertRaises(error) as caught:
            render(values)
        for needle in needles:
            self.assertIn(needle, str(caught.exception))

    def test_schema_rejects_bad_values_naming_them(self):
        self.assert_rejected({"replicaCount": 0}, helm.HelmValuesError, "replicaCount")
        self.assert_rejected({"bogus": 1}, helm.HelmValuesError, "bogus")
        self.assert_rejected({"securityContext": {"readOnlyRootFilesystem": False}}, helm.HelmValuesError,
                             "readOnlyRootFilesystem")
        self.assert_rejected({"podSecurityContext": {"runAsNonRoot": False}}, helm.HelmValuesError, "runAsNonRoot")
        self.assert_rejected({"watchNamespaces": ["Not_A_Namespace"]}, helm.HelmValuesError, "watchNamespaces")
        self.assert_rejected({"logLevel": "loud"}, helm.HelmValuesError, "logLevel")
        self.assert_rejected({"clientRateLimit": {"qps": -1}}, helm.HelmValuesError, "qps")

    def test_two_replicas_without_leader_election_fail_to_render(self):
        self.assert_rejected({"leaderElection": {"enabled": False}}, helm.HelmRenderError, "leaderElection.enabled")


if __name__ == "__main__":
    unittest.main(verbosity=2)
