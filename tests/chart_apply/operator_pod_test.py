#!/usr/bin/python3
"""The operator and its workers run as a cluster runs them (issues 29.2, 37, 38): the real `helm install` (Helm 4's
defaults) of charts/torus-operator on kube-standin with TLS, its Deployment controller and the process kubelet
(--run-pods), with the images scripts/images.sh built loaded on every node (--load-image, as `kind load
image-archive` does) and nothing mapped to the build tree: the chart's default values name those images, so the
operator pod runs the operator image's entrypoint with the chart's args, from the image's read-only root, as the
image's user 65532; the ServiceAccount admission gave the pod its kube-api-access volume (token, ca.crt, namespace),
which the kubelet projected with a token of the chart's ServiceAccount, and KUBERNETES_SERVICE_HOST/PORT point at the
stand-in. Nothing else tells the operator where the API is (no kubeconfig, no flag), so it runs with its in-cluster
config, and so with the chart's RBAC. Then:
  - examples/fashion-mnist.yaml, scaled down to one epoch, applied with kubectl: its worker pods run from the worker
    image (the operator's default), as 65532, read the data set from each node's disk (hostPath) and write their
    checkpoints to a new claim (root-owned, made theirs by fsGroup), and the job Succeeds;
  - a job naming a worker image no registry has: its pods show ImagePullBackOff and the job's PodsWaiting condition
    names the pod and the image;
  - `helm upgrade` with changed values rolls the operator pod (a new pod, `kubectl rollout status`, the new operator
    takes the lease), and `helm uninstall` removes the operator and leaves the CRD and the jobs.

Pods share the host's network (no network namespaces; each has its own loopback pod IP), and the chart binds
/metrics on 0.0.0.0: two operator pods of one rollout overlap, so the upgrade also moves metrics.port.

Run by chart_apply_test.cc (needs root: the process kubelet makes mount namespaces); standalone:
  /usr/bin/python3 tests/chart_apply/operator_pod_test.py --standin build/bin/kube-standin \
      --images build/images/out --kubectl .tools/bin/kubectl --helm .tools/bin/helm
"""
import argparse
import glob
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import yaml

import standin_process
from standin_process import Standin

HERE = pathlib.Path(__file__).resolve().parent
CHART = HERE.parents[1] / "charts" / "torus-operator"
RELEASE = "torus"
NAMESPACE = "torus-system"
OPERATOR = "torus-torus-operator"  # the release's full name: Deployment and ServiceAccount
SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
DEADLINE_S = 60
IMAGES = HELM = None  # from the arguments: the folder of images.json and the archives, and helm
EXAMPLE = HERE.parents[1] / "examples" / "fashion-mnist.yaml"
DATASETS = "/usr/share/datasets"  # the example's hostPath: on each node's disk
NONROOT = 65532

# A tiny CPU job whose worker image no registry has.
MISSING_IMAGE = "ghcr.io/torus-dev/torus-worker:no-such-tag"
JOB_OF_A_MISSING_IMAGE = """apiVersion: torus.dev/v1alpha1
kind: TrainingJob
metadata: {name: pull, namespace: default}
spec:
  gang: {workers: 1, processesPerWorker: 1, device: cpu, threadsPerProcess: 1, image: %s}
  model: {arch: resnet9, widths: [8, 8, 16, 32], numClasses: 4}
  data:
    dataset: synthetic
    imageSize: 16
    synthetic: {trainImages: 128, validationImages: 32, numClasses: 4}
  training: {epochs: 1, batchSize: 32, lrSchedule: {type: one-cycle, peak: 0.1}}
""" % MISSING_IMAGE


def images():
    """reference -> (archive, digest) of what scripts/images.sh built."""
    with open(os.path.join(IMAGES, "images.json")) as f:
        built = json.load(f)
    out = {}
    for image in built:
        name, tag = image["reference"].rsplit(":", 1)
        out[image["reference"]] = (os.path.join(IMAGES, f"{name.rsplit('/', 1)[1]}-{tag}.oci.tar"), image["digest"])
    return out


def scaled_down_example(rendezvous_port, metrics_port):
    """examples/fashion-mnist.yaml for one epoch, on ports free here."""
    job = yaml.safe_load(EXAMPLE.read_text())
    job["metadata"]["namespace"] = "default"
    job["spec"]["training"]["epochs"] = 1
    job["spec"]["rendezvousPort"] = rendezvous_port
    job["spec"]["metricsPort"] = metrics_port
    return yaml.safe_dump(job)


def link_or_copy(source, destination):
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)


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
        cls.images = images()
        loads = [arg for archive, _ in cls.images.values() for arg in ("--load-image", archive)]
        cls.standin = Standin(cls.tmp.name, ["--kubelet", "--nodes", "2", "--run-pods", cls.pods, *loads,
                                             "--pod-env", "OMP_WAIT_POLICY=passive"])
        # Each node's disk holds the data set at the example's hostPath, as a cluster's nodes would (linked, not
        # copied, where the file system allows).
        for node in ("node-0", "node-1"):
            shutil.copytree(DATASETS, os.path.join(cls.pods, "_nodes", node, DATASETS.lstrip("/")),
                            copy_function=link_or_copy, dirs_exist_ok=True)

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

    def process_of(self, pod, container):
        with open(os.path.join(self.pod_dir(pod), f"{container}.pid")) as f:
            return int(f.read())

    def assert_runs_from_its_image(self, pod, container, repository):
        """The container's process: the image's user, in a root of its own that is the image's, read-only."""
        pid = self.process_of(pod, container)
        with open(f"/proc/{pid}/status") as f:
            ids = {line.split(":")[0]: line.split()[1:] for line in f if line.startswith(("Uid", "Gid"))}
        self.assertEqual(ids["Uid"], [str(NONROOT)] * 4)
        self.assertEqual(ids["Gid"], [str(NONROOT)] * 4)
        self.assertNotEqual(os.readlink(f"/proc/{pid}/ns/mnt"), os.readlink("/proc/self/ns/mnt"))
        root = f"/proc/{pid}/root"
        self.assertTrue(os.path.exists(os.path.join(root, "usr/share/doc/torus/packages.txt")))
        self.assertFalse(os.path.exists(os.path.join(root, "work")))  # nothing of the host's tree
        with self.assertRaises(OSError) as refused:
            open(os.path.join(root, "written-by-the-test"), "w").close()
        self.assertEqual(refused.exception.errno, 30)  # EROFS: readOnlyRootFilesystem

    def assert_from_image(self, pod, reference):
        _, digest = self.images[reference]
        [status] = pod["status"]["containerStatuses"]
        self.assertEqual(status["imageID"], reference.rsplit(":", 1)[0] + "@" + digest)

    def test_helm_install_runs_the_operator_pod_which_runs_a_job_and_rolls_on_upgrade(self):
        # The chart's defaults: its images are the ones scripts/images.sh built, tagged with its appVersion.
        self.helm("install", RELEASE, str(CHART), "-n", NAMESPACE, "--create-namespace", "--set", "replicaCount=1",
                  "--set", f"metrics.port={free_port()}")
        self.rollout()
        [pod] = self.operator_pods()
        spec = pod["spec"]
        self.assertEqual(spec["serviceAccountName"], OPERATOR)
        [access] = [v for v in spec["volumes"] if v["name"].startswith("kube-api-access-")]
        mounts = {m["mountPath"]: m for m in spec["containers"][0]["volumeMounts"]}
        self.assertEqual(mounts[SA_PATH], {"name": access["name"], "mountPath": SA_PATH, "readOnly": True})
        self.assertNotIn("command", spec["containers"][0])  # the image's entrypoint
        [operator_image] = [r for r in self.images if "torus-operator" in r]
        self.assertEqual(spec["containers"][0]["image"], operator_image)
        self.await_leader(pod)
        self.assert_from_image(self.operator_pods()[0], operator_image)
        self.assert_runs_from_its_image(pod, "operator", operator_image)

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

        # The example, one epoch: workers from the worker image (the operator's default), as 65532, checkpoints on a
        # new claim that fsGroup makes theirs.
        self.standin.ok("apply", "-f", "-", stdin=scaled_down_example(free_port(), free_port()))
        waited = self.standin.kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "trainingjob/fashion-mnist",
                                      "-n", "default", "--timeout=180s")
        self.assertEqual(waited.returncode, 0, f"{waited.stderr}\n{self.logs()}")
        [worker_image] = [r for r in self.images if "torus-worker" in r]
        workers = json.loads(self.standin.ok("get", "pods", "-n", "default", "-l",
                                             "torus.dev/job-name=fashion-mnist", "-o", "json"))["items"]
        # It learned from the real data set on the nodes' disks: rank 0's evaluation after its one epoch (the
        # recipe reaches ~88%; chance is 10%, and blank or shuffled images stay there).
        [rank0] = [w for w in workers if w["metadata"]["name"].endswith("-worker-0")]
        evaluated = re.search(r"evaluation after epoch 1: top-1 ([0-9.]+)%", self.log_of(rank0, "worker"))
        self.assertIsNotNone(evaluated, self.log_of(rank0, "worker")[-3000:])
        self.assertGreater(float(evaluated.group(1)), 80.0)
        # And the job's status says where it ended (rank 0's result, which a job shorter than the operator's 15 s
        # progress interval would otherwise never show): the last step of the epoch and that accuracy.
        progress = json.loads(self.standin.ok("get", "trainingjob", "fashion-mnist", "-n", "default", "-o",
                                              "json"))["status"]["progress"]
        self.assertEqual(progress["step"], 60000 // 256, progress)
        self.assertAlmostEqual(progress["accuracy"] * 100, float(evaluated.group(1)), places=2, msg=progress)
        self.assertEqual(len(workers), 2)
        for worker in workers:
            self.assertEqual(worker["status"]["phase"], "Succeeded")
            self.assertEqual(worker["spec"]["containers"][0]["image"], worker_image)
            self.assert_from_image(worker, worker_image)
        [claim] = glob.glob(os.path.join(self.pods, "_claims", "default", "*"))
        self.assertEqual(os.stat(claim).st_gid, NONROOT)  # fsGroup, OnRootMismatch
        written = [os.path.join(d, f) for d, _, files in os.walk(claim) for f in files]
        self.assertTrue(written, "no checkpoint in the claim")
        self.assertEqual({os.stat(f).st_uid for f in written}, {NONROOT})

        # An image no registry has: the pod backs off, and the job says which pod and image.
        self.standin.ok("apply", "-f", "-", stdin=JOB_OF_A_MISSING_IMAGE)
        self.standin.ok("wait", "--for=condition=PodsWaiting", "trainingjob/pull", "-n", "default",
                        f"--timeout={DEADLINE_S}s")
        job = json.loads(self.standin.ok("get", "trainingjob", "pull", "-n", "default", "-o", "json"))
        [waiting] = [c for c in job["status"]["conditions"] if c["type"] == "PodsWaiting"]
        self.assertIn(waiting["reason"], ("ErrImagePull", "ImagePullBackOff"))
        self.assertIn("pod pull-worker-0: ", waiting["message"])
        self.assertIn(f'"{MISSING_IMAGE}"', waiting["message"])
        self.assertEqual(job["status"]["phase"], "Pending")
        self.standin.ok("wait", "--for=jsonpath={.status.containerStatuses[0].state.waiting.reason}=ImagePullBackOff",
                        "pod/pull-worker-0", "-n", "default", f"--timeout={DEADLINE_S}s")

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
        self.assertEqual(self.standin.ok("get", "trainingjob", "fashion-mnist", "-n", "default",
                                         "-o", "jsonpath={.status.phase}"), "Succeeded")
        self.assertNotIn("DestinationRefused", self.logs())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("--standin", "--images", "--kubectl", "--helm"):
        parser.add_argument(flag, required=True)
    args, rest = parser.parse_known_args()
    for path in (args.standin, args.kubectl, args.helm):
        if not os.access(path, os.X_OK):
            sys.exit(f"operator_pod_test: {path}: not an executable file")
    if not os.path.exists(os.path.join(args.images, "images.json")):
        sys.exit(f"operator_pod_test: {args.images}/images.json: missing (scripts/images.sh builds the images)")
    standin_process.STANDIN = os.path.abspath(args.standin)
    standin_process.KUBECTL = os.path.abspath(args.kubectl)
    IMAGES, HELM = os.path.abspath(args.images), os.path.abspath(args.helm)
    started = time.monotonic()
    program = unittest.main(argv=[sys.argv[0], "-v", *rest], exit=False)
    print(f"operator_pod_test: {time.monotonic() - started:.1f} s")
    sys.exit(0 if program.result.wasSuccessful() else 1)
