#!/usr/bin/python3
"""The operator runs as the chart's pod, as on a cluster (issue 29.2): the real `helm install` (Helm 4's defaults)
of charts/torus-operator on kube-standin with TLS, its Deployment controller and the process kubelet (--run-pods).
The Deployment's pod runs `build/bin/torus` (the image torus-operator's entrypoint, mapped with --pod-image) with the
chart's args; the ServiceAccount admission gave the pod its kube-api-access volume (token, ca.crt, namespace), which
the kubelet projected with a token of the chart's ServiceAccount, and KUBERNETES_SERVICE_HOST/PORT point at the
stand-in. Nothing else tells the operator where the API is (no kubeconfig, no flag), so it runs with its in-cluster
config, and so with the chart's RBAC. Then: a TrainingJob applied with kubectl runs to Succeeded (a real
torus-worker pod), `helm upgrade` with changed values rolls the operator pod (a new pod, `kubectl rollout status`,
the new operator takes the lease), and `helm uninstall` removes the operator and leaves the CRD and the job.

Pods share the host's network (no network namespaces; each has its own loopback pod IP), and the chart binds
/metrics on 0.0.0.0: two operator pods of one rollout overlap, so the upgrade also moves metrics.port.

Run by chart_apply_test.cc (needs root: the process kubelet makes mount namespaces); standalone:
  /usr/bin/python3 tests/chart_apply/operator_pod_test.py --standin build/bin/kube-standin --torus build/bin/torus \
      --torus-worker build/bin/torus-worker --kubectl .tools/bin/kubectl --helm .tools/bin/helm
"""
import argparse
import glob
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import standin_process
from standin_process import Standin

HERE = pathlib.Path(__file__).resolve().parent
CHART = HERE.parents[1] / "charts" / "torus-operator"
RELEASE = "torus"
NAMESPACE = "torus-system"
OPERATOR = "torus-torus-operator"  # the release's full name: Deployment and ServiceAccount
SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
DEADLINE_S = 60
TORUS = TORUS_WORKER = HELM = None  # from the arguments

# A tiny CPU job on synthetic data: one worker, checkpoints on a claim (the operator requires a volume for them).
JOB = """apiVersion: torus.dev/v1alpha1
kind: TrainingJob
metadata: {name: tiny, namespace: default}
spec:
  rendezvousPort: %d
  metricsPort: %d
  gang: {workers: 1, processesPerWorker: 1, device: cpu, threadsPerProcess: 1, image: torus-worker:dev}
  model: {arch: resnet9, widths: [8, 8, 16, 32], numClasses: 4}
  data:
    dataset: synthetic
    imageSize: 16
    loaderThreads: 1
    synthetic: {trainImages: 128, validationImages: 32, numClasses: 4}
  training:
    epochs: 1
    batchSize: 32
    lrSchedule: {type: one-cycle, peak: 0.1}
    checkpoint:
      dir: /var/lib/torus/checkpoints
      everySteps: 2
      volumeClaimTemplate:
        spec: {resources: {requests: {storage: 1Gi}}}
  runPolicy: {restartPolicy: ExitCode}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def await_true(what, predicate, detail=lambda: ""):
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {DEADLINE_S} s\n{detail()}")
        time.sleep(0.1)


class OperatorAsTheChartsPod(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="torus-operator-pod-")
        cls.pods = os.path.join(cls.tmp.name, "pods")
        env_kubeconfig = os.environ.pop("KUBECONFIG", None)  # the pods inherit the stand-in's environment
        try:
            cls.standin = Standin(cls.tmp.name, ["--kubelet", "--nodes", "2", "--run-pods", cls.pods,
                                                 "--pod-image", f"torus-operator={TORUS}",
                                                 "--pod-command", f"torus-worker={TORUS_WORKER}",
                                                 "--pod-env", "OMP_WAIT_POLICY=passive"])
        finally:
            if env_kubeconfig is not None:
                os.environ["KUBECONFIG"] = env_kubeconfig

    @classmethod
    def tearDownClass(cls):
        cls.standin.stop()
        if os.environ.get("TORUS_KEEP_TEST_DIRS"):
            print(f"kept {cls.tmp.name}")
        else:
            cls.tmp.cleanup()

    def helm(self, *args):
        env = {**os.environ, "HELM_CACHE_HOME": os.path.join(self.tmp.name, "helm-cache"),
               "HELM_CONFIG_HOME": os.path.join(self.tmp.name, "helm-config"),
               "HELM_DATA_HOME": os.path.join(self.tmp.name, "helm-data")}
        argv = [HELM, "--kubeconfig", self.standin.kubeconfig, *args]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=DEADLINE_S, env=env)
        self.assertEqual(result.returncode, 0, f"helm {' '.join(args)}:\n{result.stderr}")
        return result.stdout

    def operator_pods(self):
        return json.loads(self.standin.ok("get", "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=operator",
                                          "-o", "json"))["items"]

    def pod_dir(self, pod):
        meta = pod["metadata"]
        return os.path.join(self.pods, meta["namespace"], f"{meta['name']}-{meta['uid']}")

    def log_of(self, pod, container="operator"):
        try:
            with open(os.path.join(self.pod_dir(pod), f"{container}.log")) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def logs(self):
        return "\n".join(f"== {path}\n{pathlib.Path(path).read_text()[-3000:]}"
                         for path in glob.glob(os.path.join(self.pods, "*", "*", "*.log")))

    def await_leader(self, pod):
        name = pod["metadata"]["name"]
        await_true(f"operator pod {name} leads and syncs",
                   lambda: f"{name} is the leader" in self.log_of(pod) and "caches synced" in self.log_of(pod),
                   self.logs)

    def rollout(self):
        self.standin.ok("rollout", "status", f"deployment/{OPERATOR}", "-n", NAMESPACE, f"--timeout={DEADLINE_S}s")

    def test_helm_install_runs_the_operator_pod_which_runs_a_job_and_rolls_on_upgrade(self):
        values = ["--set", "replicaCount=1", "--set", "image.repository=torus-operator", "--set", "image.tag=dev",
                  "--set", "workerImage.repository=torus-worker", "--set", "workerImage.tag=dev"]
        self.helm("install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace", *values,
                  "--set", f"metrics.port={free_port()}")
        self.rollout()
        [pod] = self.operator_pods()
        spec = pod["spec"]
        self.assertEqual(spec["serviceAccountName"], OPERATOR)
        [access] = [v for v in spec["volumes"] if v["name"].startswith("kube-api-access-")]
        mounts = {m["mountPath"]: m for m in spec["containers"][0]["volumeMounts"]}
        self.assertEqual(mounts[SA_PATH], {"name": access["name"], "mountPath": SA_PATH, "readOnly": True})
        self.assertNotIn("command", spec["containers"][0])  # the image's entrypoint: --pod-image
        self.await_leader(pod)

        # The projected files are the chart's account's: its token authenticates as that account and RBAC holds it
        # to the chart's roles (the operator may list pods, not cluster roles).
        projected = os.path.join(self.pod_dir(pod), "volumes", access["name"])
        with open(os.path.join(projected, "namespace")) as f:
            self.assertEqual(f.read(), NAMESPACE)
        with open(os.path.join(projected, "ca.crt")) as f, open(os.path.join(self.tmp.name, "tls", "ca.crt")) as ca:
            self.assertEqual(f.read(), ca.read())
        with open(os.path.join(projected, "token")) as f:
            token = f.read()
        self.standin.ok("--token", token, "get", "pods", "-n", NAMESPACE)
        refused = self.standin.kubectl("--token", token, "get", "clusterroles")
        self.assertNotEqual(refused.returncode, 0, refused.stdout)
        self.assertIn(f'User "system:serviceaccount:{NAMESPACE}:{OPERATOR}" cannot list resource "clusterroles"',
                      refused.stderr)

        self.standin.ok("apply", "-f", "-", stdin=JOB % (free_port(), free_port()))
        waited = self.standin.kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "trainingjob/tiny",
                                      "-n", "default", f"--timeout={DEADLINE_S}s")
        self.assertEqual(waited.returncode, 0, f"{waited.stderr}\n{self.logs()}")
        [worker] = json.loads(self.standin.ok("get", "pods", "-n", "default", "-l", "torus.dev/job-name=tiny",
                                              "-o", "json"))["items"]
        self.assertEqual(worker["status"]["phase"], "Succeeded")
        self.assertEqual(worker["spec"]["serviceAccountName"], "default")

        # A changed value rolls the pod; the new operator takes over the lease the old one released.
        self.helm("upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "--reuse-values", "--set", "logLevel=debug",
                  "--set", f"metrics.port={free_port()}")
        self.rollout()
        await_true("the old operator pod is gone", lambda: len(self.operator_pods()) == 1, self.logs)
        [rolled] = self.operator_pods()
        self.assertNotEqual(rolled["metadata"]["name"], pod["metadata"]["name"])
        self.assertEqual(rolled["status"]["containerStatuses"][0]["restartCount"], 0, self.log_of(rolled))
        self.assertIn('"TORUS_LOG_LEVEL","value":"debug"', json.dumps(rolled["spec"]["containers"][0]["env"],
                                                                      separators=(",", ":")))
        self.assertIn("released the lease", self.log_of(pod))
        self.await_leader(rolled)

        self.helm("uninstall", RELEASE, "-n", NAMESPACE)
        self.standin.ok("wait", "--for=delete", f"pod/{rolled['metadata']['name']}", "-n", NAMESPACE,
                        f"--timeout={DEADLINE_S}s")
        self.assertEqual(self.standin.ok("get", "deployments,replicasets,pods", "-n", NAMESPACE, "-o", "name"), "")
        self.standin.ok("get", "crd", "trainingjobs.torus.dev")
        self.assertEqual(self.standin.ok("get", "trainingjob", "tiny", "-n", "default",
                                         "-o", "jsonpath={.status.phase}"), "Succeeded")
        self.assertNotIn("DestinationRefused", self.logs())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("--standin", "--torus", "--torus-worker", "--kubectl", "--helm"):
        parser.add_argument(flag, required=True)
    args, rest = parser.parse_known_args()
    for path in (args.standin, args.torus, args.torus_worker, args.kubectl, args.helm):
        if not os.access(path, os.X_OK):
            sys.exit(f"operator_pod_test: {path}: not an executable file")
    standin_process.STANDIN = os.path.abspath(args.standin)
    standin_process.KUBECTL = os.path.abspath(args.kubectl)
    TORUS, TORUS_WORKER, HELM = (os.path.abspath(p) for p in (args.torus, args.torus_worker, args.helm))
    started = time.monotonic()
    program = unittest.main(argv=[sys.argv[0], "-v", *rest], exit=False)
    print(f"operator_pod_test: {time.monotonic() - started:.1f} s")
    sys.exit(0 if program.result.wasSuccessful() else 1)
