"""The kube-standin process the chart test installs on (HTTPS, a kubeconfig and a kubectl discovery cache of its own),
and the field-by-field comparison of rendered and served objects. STANDIN and KUBECTL are set by chart_apply_test.py
from its arguments."""
import json
import os
import re
import select
import signal
import subprocess

STANDIN = None  # path of the kube-standin binary
KUBECTL = None  # path of the pinned kubectl
KUBECTL_DEADLINE_S = 60
STANDIN_READY_DEADLINE_S = 20


def is_subset(expected, actual, path="$"):
    """None when every field of `expected` is in `actual` with the same value (the server may add defaults), else the
    path of the first difference and both values."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {json.dumps(actual)[:200]}"
        for key, value in expected.items():
            if key not in actual:
                return f"{path}.{key}: missing on the server (rendered {json.dumps(value)[:200]})"
            difference = is_subset(value, actual[key], f"{path}.{key}")
            if difference:
                return difference
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{path}: rendered {json.dumps(expected)[:200]}, server has {json.dumps(actual)[:200]}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            difference = is_subset(e, a, f"{path}[{i}]")
            if difference:
                return difference
        return None
    if expected != actual:
        return f"{path}: rendered {json.dumps(expected)}, server has {json.dumps(actual)}"
    return None


def key_of(obj):
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


class Standin:
    """kube-standin as a process on a free port (HTTPS), with a kubeconfig and a kubectl discovery cache of its own."""

    def __init__(self, workdir, extra_args=()):
        self.kubeconfig = os.path.join(workdir, "kubeconfig")
        self.cache = os.path.join(workdir, "kubectl-cache")
        self.log = open(os.path.join(workdir, "standin.log"), "w+")
        # HTTPS with token authentication, as a cluster's apiserver serves kubectl.
        self.process = subprocess.Popen([STANDIN, "--port", "0", "--kubeconfig", self.kubeconfig,
                                         "--tls-dir", os.path.join(workdir, "tls"), *extra_args],
                                        stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.url = self._first_line()

    def _first_line(self):
        ready, _, _ = select.select([self.process.stdout], [], [], STANDIN_READY_DEADLINE_S)
        line = self.process.stdout.readline().strip() if ready else ""
        if not line.startswith("https://"):
            self.stop()
            self.log.seek(0)
            raise AssertionError(f"kube-standin did not print its URL within {STANDIN_READY_DEADLINE_S} s "
                                 f"(exit {self.process.returncode}); log:\n{self.log.read()[-3000:]}")
        return line

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        self.log.close()

    def service_account_kubeconfig(self, name, namespace):
        """A kubeconfig that authenticates as the service account, with a token the stand-in's TokenRequest API
        minted (`kubectl create token`), as a pod of that account gets one: RBAC decides what it may do."""
        token = self.ok("create", "token", name, "-n", namespace).strip()
        path = f"{self.kubeconfig}-{namespace}-{name}"
        with open(self.kubeconfig) as f:
            text = f.read()
        self_token = re.search(r"^    token: (\S+)$", text, re.M)
        assert self_token, f"no token in {self.kubeconfig}"
        with open(path, "w") as f:
            f.write(text.replace(self_token.group(0), f"    token: {token}"))
        return path

    def create_namespace(self, name):
        # As a manifest: `kubectl create namespace` sends protobuf, which the stand-in does not speak.
        self.ok("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))

    def kubectl(self, *args, stdin=None):
        argv = [KUBECTL, "--kubeconfig", self.kubeconfig, "--cache-dir", self.cache, *args]
        try:
            return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=KUBECTL_DEADLINE_S)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"{' '.join(argv)}: no answer within {KUBECTL_DEADLINE_S} s") from e

    def ok(self, *args, stdin=None):
        result = self.kubectl(*args, stdin=stdin)
        if result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result.stdout
