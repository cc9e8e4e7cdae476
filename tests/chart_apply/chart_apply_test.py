#!/usr/bin/python3
"""Installs charts/torus-operator on the Kubernetes API stand-in the way `helm install` would, with the real kubectl:
the chart is rendered with the official Helm library (PyPI helm-python-sdk), its CRDs are applied first and awaited
(Established), then every rendered manifest is applied, read back with `kubectl get` and compared field by field.

Prometheus Operator kinds (ServiceMonitor, PodMonitor, PrometheusRule): the upstream monitoring.coreos.com CRDs are
not available offline, so this test registers its own (monitoring-crds/: a strict subset of the documented v1 API,
no preserve-unknown-fields) before applying a value set that renders those kinds. A kind the stand-in does not serve
is never skipped: `kubectl apply` fails with "no matches for kind" and so does the test (UnknownKindFailsLoudly shows
it).

The real `torus operator` is also started with the container args the chart rendered (as the kubelet would expand
them), authenticated as the chart's ServiceAccount with a token the stand-in minted (`kubectl create token`): the
stand-in evaluates RBAC, so the rendered Roles and bindings are all it may use. With a namespace list it must run
TrainingJobs in the listed namespaces and leave the others alone; with the defaults it runs a job, and fails with a
403 naming the verb once `create` is removed from the ClusterRole's pods rule.

Run by chart_apply_test.cc; standalone:
  /usr/bin/python3 tests/chart_apply/chart_apply_test.py --standin build/bin/kube-standin [--torus build/bin/torus] \
      [TestClass ...]
"""
import argparse
import json
import os
import pathlib
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import yaml

import standin_process
from standin_process import Standin, is_subset, key_of

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CHART = ROOT / "charts" / "torus-operator"
MONITORING_CRDS = HERE / "monitoring-crds"
RELEASE = "torus"
NAMESPACE = "torus-system"
KUBECTL = None  # --kubectl: the pinned client (scripts/lib.sh installs it)
HELM = None  # --helm: the pinned helm (HelmCli)
KUBECTL_DEADLINE_S = 60
STANDIN = None  # path of the kube-standin binary, from --standin
TORUS = None  # path of the torus binary, from --torus (the operator run with the rendered args)
OPERATOR_DEADLINE_S = 60

try:
    import helm_python as helm
except ImportError as e:  # installed by scripts/lib.sh; say so instead of a bare traceback
    sys.exit(f"chart_apply_test: cannot import helm_python ({e}); install it with "
             "`/usr/bin/python3 -m pip install --break-system-packages helm-python-sdk==0.2.2`")

# What the stand-in serves out of the box (docs/testing.md) plus the chart's own CRD kinds. A rendered kind outside
# this set and without a CRD applied by the test makes `kubectl apply` fail, which fails the test.
MONITORING_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}


def render(values):
    """(crd texts, manifest documents) as `helm install` would send them (NOTES.txt and empty documents dropped)."""
    chart = helm.Chart.load(str(CHART))
    manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    docs = []
    for path, text in sorted(manifests.items()):
        if path.endswith(".yaml"):
            docs.extend(d for d in yaml.safe_load_all(text) if d)
    return [crd["data"] for crd in chart.crds], docs


class ChartInstalled:
    """Mixin: one stand-in per test class with the chart installed; subclasses name VALUES and what they expect."""
    VALUES = None
    REPLICAS = 2
    WITH_MONITORING_CRDS = False

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="torus-chart-apply-")
        cls.standin = Standin(cls.tmp.name)
        cls.crds, cls.docs = render(cls.VALUES)
        cls.manifests = os.path.join(cls.tmp.name, "manifests.yaml")
        with open(cls.manifests, "w") as f:
            yaml.safe_dump_all(cls.docs, f, sort_keys=False)
        try:
            cls.install()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.standin.stop()
        cls.tmp.cleanup()

    @classmethod
    def namespaces(cls):
        return sorted({NAMESPACE} | {d["metadata"]["namespace"] for d in cls.docs if "namespace" in d["metadata"]})

    @classmethod
    def apply_crds(cls, texts):
        names = []
        for text in texts:
            names.extend(d["metadata"]["name"] for d in yaml.safe_load_all(text) if d)
            cls.standin.ok("apply", "-f", "-", stdin=text)
        cls.standin.ok("wait", "--for=condition=Established", "--timeout=30s", *[f"crd/{n}" for n in names])

    @classmethod
    def install(cls):
        # The release namespace (helm install --create-namespace) and the users' namespaces the values name.
        for ns in cls.namespaces():
            cls.standin.create_namespace(ns)
        cls.apply_crds(cls.crds)  # Helm installs crds/ first and waits for them
        if cls.WITH_MONITORING_CRDS:
            cls.apply_crds([p.read_text() for p in sorted(MONITORING_CRDS.glob("*.yaml"))])
        cls.first_apply = cls.standin.ok("apply", "-f", cls.manifests)

    def one(self, kind):
        found = [d for d in self.docs if d["kind"] == kind]
        self.assertEqual(len(found), 1, f"expected one rendered {kind}")
        return found[0]

    def start_operator(self, log):
        """`torus operator` with the container args the chart rendered, authenticated as the chart's ServiceAccount
        (a token the stand-in minted for it): the rendered Roles and bindings are all it may use."""
        container = self.one("Deployment")["spec"]["template"]["spec"]["containers"][0]
        # The kubelet expands $(VAR) from the container's env; the downward API gives the pod's name and namespace.
        env = {"POD_NAME": "torus-operator-0", "POD_NAMESPACE": NAMESPACE, "TORUS_LOG_LEVEL": "info"}
        args = [re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), a) for a in container["args"]]
        kubeconfig = self.standin.service_account_kubeconfig(self.one("ServiceAccount")["metadata"]["name"], NAMESPACE)
        # Only the listen address differs from the pod (a later flag wins): port 8080 may be taken here.
        return subprocess.Popen([TORUS, *args, "--metrics-address=127.0.0.1:0", "--kubeconfig", kubeconfig],
                                env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)

    def stop_operator(self, operator, log):
        operator.send_signal(signal.SIGTERM)
        try:
            code = operator.wait(timeout=20)
        except subprocess.TimeoutExpired:
            operator.kill()
            code = operator.wait()
        log.seek(0)
        self.assertEqual(code, 0, log.read()[-3000:])

    def wait_for_pod(self, operator, log, ns, pod):
        # Awaited in short kubectl waits, so that an operator that exits (a flag it refuses) fails at once.
        deadline = time.monotonic() + OPERATOR_DEADLINE_S
        while True:
            result = self.standin.kubectl("wait", "--for=create", f"pod/{pod}", "-n", ns, "--timeout=5s")
            if result.returncode == 0 or operator.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                self.assertEqual(result.returncode, 0, f"{result.stderr}\noperator exit {operator.poll()}, "
                                 f"log:\n{log.read()[-3000:]}")
                return



class ChartOnStandin(ChartInstalled):
    """Mixin: the checks every value set gets."""

    def served(self):
        listing = json.loads(self.standin.ok("get", "-f", self.manifests, "-o", "json"))
        return {key_of(obj): obj for obj in listing["items"]}

    def test_every_rendered_object_was_created(self):
        lines = [line for line in self.first_apply.splitlines() if line.strip()]
        self.assertEqual(len(lines), len(self.docs), self.first_apply)
        for line in lines:
            self.assertTrue(line.endswith(" created"), line)

    def test_every_object_is_served_with_its_rendered_fields(self):
        served = self.served()
        self.assertEqual(sorted(served), sorted(key_of(d) for d in self.docs))
        for doc in self.docs:
            obj = served[key_of(doc)]
            self.assertTrue(obj["metadata"].get("uid"), key_of(doc))
            self.assertIsNone(is_subset(doc, obj), key_of(doc))

    def test_applying_again_changes_nothing(self):
        # The server must see no change: every resourceVersion stays. (kubectl still reports the
        # PodDisruptionBudget "configured": its spec.selector has patchStrategy replace, so the client-side patch is
        # never empty, against a real apiserver too.)
        before = {key: obj["metadata"]["resourceVersion"] for key, obj in self.served().items()}
        again = self.standin.ok("apply", "-f", self.manifests)
        after = {key: obj["metadata"]["resourceVersion"] for key, obj in self.served().items()}
        self.assertEqual(before, after, again)
        for line in (line for line in again.splitlines() if line.strip()):
            self.assertTrue(line.endswith(" unchanged") or line.startswith("poddisruptionbudget.policy/"), again)

    def test_the_chart_crd_serves_trainingjobs(self):
        crd = json.loads(self.standin.ok("get", "crd", "trainingjobs.torus.dev", "-o", "json"))
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        self.assertEqual(conditions.get("Established"), "True", crd["status"])
        self.assertEqual(self.standin.kubectl("get", "trainingjobs", "-A").returncode, 0)

    def test_deployment_replicas(self):
        name = self.one("Deployment")["metadata"]["name"]
        replicas = self.standin.ok("get", "deployment", name, "-n", NAMESPACE, "-o", "jsonpath={.spec.replicas}")
        self.assertEqual(replicas, str(self.REPLICAS))

    def test_service_gets_a_cluster_ip_and_the_metrics_port(self):
        name = self.one("Service")["metadata"]["name"]
        service = json.loads(self.standin.ok("get", "service", name, "-n", NAMESPACE, "-o", "json"))
        self.assertRegex(service["spec"].get("clusterIP", ""), r"^10\.96\.\d+\.\d+$")
        self.assertEqual([p["targetPort"] for p in service["spec"]["ports"]], ["http-metrics"])

    def test_rbac_bindings_point_at_served_roles_and_accounts(self):
        for binding in (d for d in self.docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
            ref = binding["roleRef"]
            ns = [] if ref["kind"] == "ClusterRole" else ["-n", binding["metadata"]["namespace"]]
            self.standin.ok("get", ref["kind"].lower(), ref["name"], *ns)
            for subject in binding["subjects"]:
                self.standin.ok("get", "serviceaccount", subject["name"], "-n", subject["namespace"])

    def test_dashboards_are_configmaps_with_the_sidecar_label(self):
        rendered = [d for d in self.docs if d["kind"] == "ConfigMap"]
        label = "grafana_dashboard=1"
        listing = json.loads(self.standin.ok("get", "configmaps", "-A", "-l", label, "-o", "json"))
        served = {}
        for cm in listing["items"]:
            ((key, text),) = cm["data"].items()
            served[key] = json.loads(text)
        if not (self.VALUES or {}).get("dashboards", {}).get("enabled", True):
            self.assertEqual(served, {})
            return
        self.assertEqual(len(listing["items"]), len(rendered))
        sources = {p.name: json.loads(p.read_text()) for p in (ROOT / "dashboards").glob("*.json")}
        self.assertEqual(served, sources)


class DefaultValues(ChartOnStandin, unittest.TestCase):
    def test_least_privilege_rbac_and_service_account_are_served(self):
        sa = self.one("ServiceAccount")["metadata"]["name"]
        self.standin.ok("get", "serviceaccount", sa, "-n", NAMESPACE)
        role = json.loads(self.standin.ok("get", "clusterrole", self.one("ClusterRole")["metadata"]["name"],
                                          "-o", "json"))
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                self.assertNotIn("*", rule.get(field, []))
        self.assertIn("trainingjobs", [r for rule in role["rules"] for r in rule["resources"]])
        # Rack ordering reads the nodes' labels: read-only, cluster-scoped.
        (nodes,) = [rule for rule in role["rules"] if "nodes" in rule["resources"]]
        self.assertEqual((nodes["resources"], sorted(nodes["verbs"])), (["nodes"], ["get", "list", "watch"]))
        self.standin.ok("get", "poddisruptionbudget", self.one("PodDisruptionBudget")["metadata"]["name"],
                        "-n", NAMESPACE)

    def test_a_typo_in_a_rendered_object_is_refused_naming_the_field(self):
        # The stand-in checks built-in kinds against the Kubernetes Python client's models (not its own schema):
        # kubectl apply sends fieldValidation=Strict, so a misspelled field fails as on a cluster.
        deployment = json.loads(json.dumps(self.one("Deployment")))
        deployment["metadata"]["name"] = "typo"
        deployment["spec"]["replicass"] = 2
        deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
        result = self.standin.kubectl("apply", "-f", "-", stdin=json.dumps(deployment))
        self.assertNotEqual(result.returncode, 0, result.stdout)
        self.assertIn('strict decoding error: unknown field "spec.replicass", unknown field '
                      '"spec.template.spec.containers[0].imagePullPolicyy"', result.stderr)
        self.assertIn("NotFound", self.standin.kubectl("get", "deployment", "typo", "-n", NAMESPACE).stderr)
        # Server-side apply (Helm 4) converts the patch to its typed form first, which names the field its way.
        container = deployment["spec"]["template"]["spec"]["containers"][0]["name"]
        result = self.standin.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(deployment))
        self.assertNotEqual(result.returncode, 0, result.stdout)
        self.assertIn(f"failed to create typed patch object ({NAMESPACE}/typo; apps/v1, Kind=Deployment):",
                      result.stderr)
        self.assertIn(f'.spec.template.spec.containers[name="{container}"].imagePullPolicyy: field not declared in '
                      "schema", result.stderr)
        # --validate=warn: applied with a warning naming the field, which is dropped.
        result = self.standin.kubectl("apply", "--validate=warn", "-f", "-", stdin=json.dumps(deployment))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn('unknown field "spec.replicass"', result.stderr)
        served = json.loads(self.standin.ok("get", "deployment", "typo", "-n", NAMESPACE, "-o", "json"))
        self.assertNotIn("replicass", served["spec"])
        self.standin.ok("delete", "deployment", "typo", "-n", NAMESPACE)
        # A value of the wrong type is refused whatever the validation, naming the field.
        service = json.loads(json.dumps(self.one("Service")))
        service["metadata"]["name"] = "mistyped"
        service["spec"]["ports"][0]["port"] = "8080"
        result = self.standin.kubectl("apply", "--validate=false", "-f", "-", stdin=json.dumps(service))
        self.assertNotEqual(result.returncode, 0, result.stdout)
        self.assertIn("cannot unmarshal string into Go struct field ServicePort.spec.ports[0].port of type int",
                      result.stderr)

    def test_no_prometheus_operator_kinds_by_default(self):
        self.assertFalse(MONITORING_KINDS & {d["kind"] for d in self.docs})


class MonitoringAndNamespacedValues(ChartOnStandin, unittest.TestCase):
    VALUES = yaml.safe_load((HERE.parent / "packaging/monitoring-values.yaml").read_text())
    REPLICAS = 3
    WITH_MONITORING_CRDS = True

    def test_prometheus_operator_kinds_are_served(self):
        self.assertEqual(MONITORING_KINDS, MONITORING_KINDS & {d["kind"] for d in self.docs})
        monitor = json.loads(self.standin.ok("get", "podmonitors", "-n", NAMESPACE, "-o", "json"))
        (pm,) = monitor["items"]
        self.assertTrue(pm["spec"]["podMetricsEndpoints"][0]["honorLabels"])
        self.assertEqual(pm["spec"]["namespaceSelector"]["matchNames"], ["team-a", "team-b"])
        sm = json.loads(self.standin.ok("get", "servicemonitors", "-n", NAMESPACE, "-o", "json"))["items"]
        self.assertEqual([s["spec"]["endpoints"][0]["interval"] for s in sm], ["15s"])
        rule = json.loads(self.standin.ok("get", "prometheusrules", "-n", NAMESPACE, "-o", "json"))["items"]
        plain = yaml.safe_load((ROOT / "dashboards" / "alerts" / "torus-rules.yaml").read_text())
        self.assertEqual([r["spec"] for r in rule], [plain])

    def test_monitoring_crds_reject_a_misspelled_field(self):
        # The stand-in CRDs are strict, so a typo in the chart's monitors cannot pass unnoticed.
        bad = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
               "metadata": {"name": "typo", "namespace": NAMESPACE},
               "spec": {"selector": {}, "podMetricsEndpoints": [{"port": "metrics", "honorLabel": True}]}}
        result = self.standin.kubectl("apply", "-f", "-", stdin=json.dumps(bad))
        self.assertNotEqual(result.returncode, 0, result.stdout)
        self.assertIn("honorLabel", result.stderr)

    def test_namespaced_roles_in_each_watched_namespace(self):
        for ns in ("team-a", "team-b"):
            roles = json.loads(self.standin.ok("get", "roles", "-n", ns, "-o", "json"))["items"]
            self.assertEqual(len(roles), 1, ns)
        # Nodes are cluster-scoped: the only cluster-wide grant is reading them (rack ordering).
        (role,) = json.loads(self.standin.ok("get", "clusterroles", "-l", f"app.kubernetes.io/instance={RELEASE}",
                                             "-o", "json"))["items"]
        self.assertEqual([(r["resources"], sorted(r["verbs"])) for r in role["rules"]],
                         [(["nodes"], ["get", "list", "watch"])])

    def test_the_operator_with_the_rendered_args_runs_jobs_only_in_the_listed_namespaces(self):
        if TORUS is None:
            self.skipTest("no --torus binary given")
        self.standin.create_namespace("team-c")
        jobs = {"team-c": "gamma", "team-a": "alpha", "team-b": "beta"}  # c first: an operator watching it acts on it
        for ns, name in jobs.items():
            self.standin.ok("apply", "-f", "-", stdin=json.dumps(training_job(ns, name)))
        with open(os.path.join(self.tmp.name, "operator.log"), "w+") as log:
            operator = self.start_operator(log)
            try:
                for ns in ("team-a", "team-b"):
                    self.wait_for_pod(operator, log, ns, f"{jobs[ns]}-worker-0")
                holder = self.standin.ok("get", "lease", "torus-operator", "-n", NAMESPACE,
                                         "-o", "jsonpath={.spec.holderIdentity}")
                self.assertEqual(holder, "torus-operator-0")
                self.assertEqual(self.standin.ok("get", "pods,configmaps,secrets", "-n", "team-c", "-l",
                                                 "app.kubernetes.io/managed-by=torus-operator", "-o", "name"), "")
                gamma = json.loads(self.standin.ok("get", "trainingjob", "gamma", "-n", "team-c", "-o", "json"))
                self.assertNotIn("status", gamma)
            finally:
                self.stop_operator(operator, log)
            log.seek(0)
            self.assertNotIn("forbidden", log.read())

    def test_dashboards_land_in_the_grafana_namespace(self):
        names = self.standin.ok("get", "configmaps", "-n", "monitoring", "-l", "grafana_dashboard=1", "-o", "name")
        self.assertEqual(len(names.split()), len([d for d in self.docs if d["kind"] == "ConfigMap"]))


def training_job(namespace, name):
    return {"apiVersion": "torus.dev/v1alpha1", "kind": "TrainingJob",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"gang": {"workers": 1}, "model": {"arch": "resnet9"}, "data": {"dataset": "synthetic"},
                     "training": {"epochs": 1, "batchSize": 32, "lrSchedule": {"peak": 0.1}}}}


class ChartRbacIsEnforced(ChartInstalled, unittest.TestCase):
    """Default values: the operator runs as the chart's ServiceAccount under the rendered ClusterRole, and the
    stand-in evaluates RBAC as a cluster does, so a verb the chart lacks fails here as it would there."""

    def require_torus(self):
        if TORUS is None:
            self.skipTest("no --torus binary given")

    def job_status_phase(self, ns, name):
        return self.standin.ok("get", "trainingjob", name, "-n", ns, "-o", "jsonpath={.status.phase}")

    def test_the_operator_as_the_chart_service_account_runs_a_job(self):
        self.require_torus()
        self.standin.create_namespace("team-rbac")
        self.standin.ok("apply", "-f", "-", stdin=json.dumps(training_job("team-rbac", "allowed")))
        with open(os.path.join(self.tmp.name, "operator-allowed.log"), "w+") as log:
            operator = self.start_operator(log)
            try:
                self.wait_for_pod(operator, log, "team-rbac", "allowed-worker-0")
                # The status subresource is written (trainingjobs/status), and the leader Lease taken.
                result = self.standin.kubectl("wait", "--for=jsonpath={.status.phase}", "trainingjob/allowed",
                                              "-n", "team-rbac", f"--timeout={OPERATOR_DEADLINE_S}s")
                self.assertEqual(result.returncode, 0, result.stderr)
            finally:
                self.stop_operator(operator, log)
            log.seek(0)
            self.assertNotIn("forbidden", log.read())

    def test_a_verb_removed_from_the_cluster_role_fails_the_operator_with_a_403_naming_it(self):
        self.require_torus()
        name = self.one("ClusterRole")["metadata"]["name"]
        role = json.loads(self.standin.ok("get", "clusterrole", name, "-o", "json"))
        original = json.dumps(role)
        (pods,) = [r for r in role["rules"] if r["resources"] == ["pods"]]
        pods["verbs"].remove("create")
        self.standin.ok("replace", "-f", "-", stdin=json.dumps(role))
        self.standin.create_namespace("team-denied")
        self.standin.ok("apply", "-f", "-", stdin=json.dumps(training_job("team-denied", "denied")))
        sa = self.one("ServiceAccount")["metadata"]["name"]
        want = (f'pods is forbidden: User "system:serviceaccount:{NAMESPACE}:{sa}" cannot create resource "pods" '
                f'in API group "" in the namespace "team-denied"')
        try:
            with open(os.path.join(self.tmp.name, "operator-denied.log"), "w+") as log:
                operator = self.start_operator(log)
                try:
                    deadline = time.monotonic() + OPERATOR_DEADLINE_S
                    seen = ""
                    while want not in seen and operator.poll() is None and time.monotonic() < deadline:
                        # The log grows as the operator retries; read it again after a short wait.
                        select.select([], [], [], 0.2)
                        log.seek(0)
                        seen = log.read()
                    self.assertIn(want, seen, f"operator exit {operator.poll()}, log:\n{seen[-3000:]}")
                finally:
                    self.stop_operator(operator, log)
            self.assertEqual(self.standin.ok("get", "pods", "-n", "team-denied", "-o", "name"), "")
        finally:
            restored = json.loads(original)
            restored["metadata"].pop("resourceVersion", None)
            self.standin.ok("replace", "-f", "-", stdin=json.dumps(restored))


class MinimalValues(ChartOnStandin, unittest.TestCase):
    VALUES = {
        "replicaCount": 1,
        "leaderElection": {"enabled": False},
        "rbac": {"create": False},
        "serviceAccount": {"create": False, "name": "existing-sa"},
        "dashboards": {"enabled": False},
    }
    REPLICAS = 1

    def test_only_the_deployment_and_service_are_installed(self):
        self.assertEqual(sorted(d["kind"] for d in self.docs), ["Deployment", "Service"])
        for resource in ("serviceaccounts", "roles", "rolebindings", "configmaps"):
            names = self.standin.ok("get", resource, "-n", NAMESPACE, "-l", f"app.kubernetes.io/instance={RELEASE}",
                                    "-o", "name")
            self.assertEqual(names, "", resource)
        sa = self.standin.ok("get", "deployment", "-n", NAMESPACE, self.one("Deployment")["metadata"]["name"],
                             "-o", "jsonpath={.spec.template.spec.serviceAccountName}")
        self.assertEqual(sa, "existing-sa")


class UnknownKindFailsLoudly(unittest.TestCase):
    """Without the monitoring CRDs the stand-in does not serve ServiceMonitor: kubectl apply must fail and name it."""

    def test_apply_without_the_kind_registered_fails_naming_it(self):
        with tempfile.TemporaryDirectory(prefix="torus-chart-apply-") as tmp:
            standin = Standin(tmp)
            try:
                crds, docs = render({"serviceMonitor": {"enabled": True}})
                standin.create_namespace(NAMESPACE)
                for text in crds:
                    standin.ok("apply", "-f", "-", stdin=text)
                manifests = yaml.safe_dump_all(docs)
                # kubectl validates first (--validate=strict): no OpenAPI document for the group version.
                result = standin.kubectl("apply", "-f", "-", stdin=manifests)
                self.assertNotEqual(result.returncode, 0, result.stdout)
                self.assertIn("the server could not find the requested resource", result.stderr)
                # Without validation the REST mapping fails, naming the kind.
                result = standin.kubectl("apply", "--validate=false", "-f", "-", stdin=manifests)
                self.assertNotEqual(result.returncode, 0, result.stdout)
                self.assertIn('no matches for kind "ServiceMonitor" in version "monitoring.coreos.com/v1"',
                              result.stderr)
            finally:
                standin.stop()


class HelmCli(unittest.TestCase):
    """The command users type, with Helm 4's defaults: `helm install` (server-side apply, field manager "helm"),
    `helm upgrade` with changed values, the chart's values schema refusing a bad value, and `helm uninstall`, which
    leaves the CRD and the jobs (Helm never deletes crds/)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="torus-helm-cli-")
        cls.standin = Standin(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.standin.stop()
        cls.tmp.cleanup()

    def helm(self, *args):
        argv = [HELM, "--kubeconfig", self.standin.kubeconfig, *args]
        env = {**os.environ, "HELM_CACHE_HOME": os.path.join(self.tmp.name, "helm-cache"),
               "HELM_CONFIG_HOME": os.path.join(self.tmp.name, "helm-config"),
               "HELM_DATA_HOME": os.path.join(self.tmp.name, "helm-data")}
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=KUBECTL_DEADLINE_S, env=env)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"{' '.join(argv)}: no answer within {KUBECTL_DEADLINE_S} s") from e

    def helm_ok(self, *args):
        result = self.helm(*args)
        self.assertEqual(result.returncode, 0, f"helm {' '.join(args)}:\n{result.stderr}")
        return result.stdout

    def deployment(self):
        return json.loads(self.standin.ok("get", "deployments", "-n", NAMESPACE, "-l",
                                          f"app.kubernetes.io/instance={RELEASE}", "-o", "json",
                                          "--show-managed-fields"))["items"]

    def release(self):
        listing = json.loads(self.helm_ok("list", "-n", NAMESPACE, "-o", "json"))
        return {r["name"]: r for r in listing}.get(RELEASE)

    def test_install_upgrade_and_uninstall(self):
        self.helm_ok("install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace")
        self.assertEqual(self.release()["revision"], "1")
        [deployment] = self.deployment()
        self.assertEqual(deployment["spec"]["replicas"], 2)
        managers = {(m["manager"], m["operation"]) for m in deployment["metadata"]["managedFields"]}
        self.assertIn(("helm", "Apply"), managers)
        crd = json.loads(self.standin.ok("get", "crd", "trainingjobs.torus.dev", "-o", "json"))
        self.assertEqual({c["type"]: c["status"] for c in crd["status"]["conditions"]}.get("Established"), "True")

        # Another field manager that changes what helm applied conflicts, as on a cluster; forced, it takes over.
        scaled = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": deployment["metadata"]["name"], "namespace": NAMESPACE},
                  "spec": {"replicas": 5}}
        result = self.standin.kubectl("apply", "--server-side", "--field-manager=ops", "-f", "-",
                                      stdin=json.dumps(scaled))
        self.assertNotEqual(result.returncode, 0, result.stdout)
        self.assertIn('conflict with "helm"', result.stderr)
        self.assertIn(".spec.replicas", result.stderr)

        self.helm_ok("upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--set", "replicaCount=3")
        self.assertEqual(self.release()["revision"], "2")
        self.assertEqual(self.deployment()[0]["spec"]["replicas"], 3)

        job = (ROOT / "examples" / "fashion-mnist.yaml").read_text()
        self.standin.ok("apply", "-n", NAMESPACE, "-f", "-", stdin=job)
        self.helm_ok("uninstall", RELEASE, "-n", NAMESPACE)
        self.assertEqual(self.deployment(), [])
        self.assertIsNone(self.release())
        self.standin.ok("get", "crd", "trainingjobs.torus.dev")
        self.assertNotEqual(self.standin.ok("get", "trainingjobs", "-n", NAMESPACE, "-o", "name"), "")

    def test_a_value_the_schema_refuses_names_the_field_and_installs_nothing(self):
        result = self.helm("install", "refused", str(CHART), "-n", "refused", "--create-namespace",
                           "--set", "replicaCount=many")
        self.assertNotEqual(result.returncode, 0, result.stdout)
        self.assertIn("replicaCount", result.stderr)
        self.assertEqual(self.standin.kubectl("get", "namespace", "refused").returncode, 1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--standin", required=True, help="path of the kube-standin binary")
    parser.add_argument("--torus", help="path of the torus binary (runs the operator with the rendered args)")
    parser.add_argument("--kubectl", required=True, help="path of the kubectl binary to drive the stand-in with")
    parser.add_argument("--helm", help="path of the helm binary (HelmCli)")
    args, rest = parser.parse_known_args()
    HELM = os.path.abspath(args.helm) if args.helm else None
    KUBECTL = os.path.abspath(args.kubectl)
    if not os.access(KUBECTL, os.X_OK):
        sys.exit(f"chart_apply_test: --kubectl {KUBECTL}: not an executable file (scripts/lib.sh torus_install_kube_tools)")
    standin_process.KUBECTL = KUBECTL
    STANDIN = standin_process.STANDIN = os.path.abspath(args.standin)
    if not os.access(STANDIN, os.X_OK):
        sys.exit(f"chart_apply_test: --standin {STANDIN}: not an executable file (build the kube-standin target)")
    if args.torus:
        TORUS = os.path.abspath(args.torus)
        if not os.access(TORUS, os.X_OK):
            sys.exit(f"chart_apply_test: --torus {TORUS}: not an executable file (build the torus target)")
    started = time.monotonic()
    program = unittest.main(argv=[sys.argv[0], "-v", *rest], exit=False)
    print(f"chart_apply_test: {time.monotonic() - started:.1f} s")
    sys.exit(0 if program.result.wasSuccessful() else 1)
