#!/usr/bin/python3
"""The GPU worker image (scripts/images.sh --gpu; docs/building.md, "GPU variant") carries what torus-worker loads.

Built twice (the second from the wheel cache, with another umask and output folder: it must download nothing and give
the same digest), then unpacked layer by layer into a root where, through the image's own dynamic loader (chroot, the
image config's Env), torus-worker and every library carried in /usr/local/lib/torus resolve all their libraries to
files of the image: none "not found", none under /usr/local/cuda, the CUDA libraries from the wheels' copies; what the
carried libraries open at run time (cuDNN's engines, NVRTC) is carried too, the driver's libcuda.so.1 and
libnvidia-ml.so.1 excepted (the NVIDIA container runtime mounts the node's). Every carried library's licence is
listed in /usr/share/doc/torus/packages.txt and is in the image. torus-worker starts as 65532 from the root mounted
read-only, with a tmpfs at /tmp as the worker pod has, and reaches the CUDA runtime (no GPU here: it fails there).

Not in the default test run: it downloads 1.1 GB of NVIDIA wheels from PyPI and compiles the CUDA backend (minutes
on 2 cores), so it is skipped (exit 77, the reason printed) unless TORUS_GPU_IMAGE=1. It needs root (chroot, mount).

usage: TORUS_GPU_IMAGE=1 gpu_image_test.py BUILD_FOLDER [TEST...]   (build/images-gpu: its build tree, wheels, out/)
"""
import gzip
import io
import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = None  # from the command line
SKIP = 77  # CTest's SKIP_RETURN_CODE for this test
NONROOT = 65532
CARRIED = "/usr/local/lib/torus"
# The NVIDIA driver's user-space libraries: the node's, mounted by the NVIDIA container runtime, never in an image.
DRIVER = re.compile(r"^lib(cuda|nvidia-ml)\.so")
# The library families the image takes from NVIDIA's wheels; what they open at run time must be carried too.
CUDA_FAMILIES = re.compile(r"^lib(cudart|cublas|cublasLt|cudnn\w*|nccl|nvrtc(-builtins)?)\.so")


def images_sh(out, umask="022"):
    env = {**os.environ, "TORUS_IMAGES_BUILD": BUILD, "TORUS_IMAGES_OUT": out}
    result = subprocess.run(["bash", "-c", f"umask {umask} && exec bash {ROOT}/scripts/images.sh --gpu"], env=env,
                            capture_output=True, text=True, timeout=3600)
    if result.returncode != 0:
        raise AssertionError(f"scripts/images.sh --gpu: exit {result.returncode}\n{result.stdout}{result.stderr}")
    with open(os.path.join(out, "images.json")) as f:
        return json.load(f), result.stdout + result.stderr


def unpack(archive, root):
    """The image's root (its layers in order) and its config."""
    with tarfile.open(archive) as tar:
        blob = lambda digest: tar.extractfile("blobs/sha256/" + digest.split(":")[1]).read()
        index = json.loads(tar.extractfile("index.json").read())
        manifest = json.loads(blob(index["manifests"][0]["digest"]))
        config = json.loads(blob(manifest["config"]["digest"]))
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob(layer["digest"])))) as t:
                t.extractall(root)
    return config


def loader_list(root, env, path):
    """(name, resolved path or None) for each library `path` loads, listed by the image's loader in a chroot."""
    result = subprocess.run(["chroot", root, "/lib64/ld-linux-x86-64.so.2", "--list", path], env=env,
                            capture_output=True, text=True)
    rows = []
    for line in (result.stdout + result.stderr).splitlines():
        line = line.strip()
        m = re.match(r"(\S+) => (\S+)", line)
        if m:
            rows.append((m.group(1), None if m.group(2) == "not" else m.group(2)))
        elif re.match(r"/\S+ \(", line):
            rows.append((os.path.basename(line.split()[0]), line.split()[0]))
    if result.returncode != 0 and not rows:
        raise AssertionError(f"{path}: the image's loader failed: {result.stderr}")
    return rows


def opened_names(path):
    """The library names a library's strings hold: what it links or opens at run time (dlopen)."""
    with open(path, "rb") as f:
        data = f.read()
    return {m.decode() for m in re.findall(rb"lib[A-Za-z0-9_\-]+\.so(?:\.[0-9]+)*", data)}


def packages_txt(root):
    """packages.txt's three sections: Debian packages and wheels (name -> licence paths), libraries -> wheel."""
    sections, current = [{}, {}, {}], -1
    for line in (pathlib.Path(root) / "usr/share/doc/torus/packages.txt").read_text().splitlines():
        if line.startswith("#"):
            current += 1
            continue
        fields = line.split()
        if current < 2:
            sections[current][fields[0]] = fields[2].split(",")
        else:
            sections[2][fields[0]] = fields[1]
    return sections


def debian_owner(path):
    for p in (path, path[4:] if path.startswith("/usr/") else "/usr" + path):
        r = subprocess.run(["dpkg-query", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":", 1)[0].strip()
    return None


class GpuImage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.first, cls.first_log = images_sh(os.path.join(BUILD, "out"))
        cls.tmp = tempfile.TemporaryDirectory(dir=BUILD)
        cls.root = os.path.join(cls.tmp.name, "root")
        cls.config = unpack(os.path.join(BUILD, "out", os.path.basename(cls.archive_name())), cls.root)
        cls.env = dict(e.split("=", 1) for e in cls.config["config"]["Env"])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def archive_name(cls):
        (image,) = cls.first
        repository, tag = image["reference"].rsplit(":", 1)
        return f"{os.path.basename(repository)}-{tag}.oci.tar"

    def test_a_second_build_downloads_nothing_and_gives_the_same_digest(self):
        with tempfile.TemporaryDirectory(dir=BUILD) as out:
            second, log = images_sh(out, umask="077")
        self.assertEqual([i["digest"] for i in second], [i["digest"] for i in self.first])
        self.assertNotIn("downloading", log)

    def test_the_tag_is_the_charts_worker_with_the_cuda_suffix_and_runs_as_nonroot(self):
        chart = (ROOT / "charts/torus-operator/Chart.yaml").read_text()
        version = re.search(r'^appVersion: "([^"]+)"', chart, re.M).group(1)
        (image,) = self.first
        self.assertTrue(image["reference"].endswith(f"/torus-worker:{version}-cuda13"), image["reference"])
        self.assertEqual(self.config["config"]["User"], f"{NONROOT}:{NONROOT}")
        self.assertEqual(self.env["LD_LIBRARY_PATH"], CARRIED)
        self.assertIn("libcuda.so.1", self.config["config"]["Labels"]["org.opencontainers.image.description"])

    def test_every_library_resolves_to_a_file_of_the_image(self):
        carried = sorted(os.listdir(self.root + CARRIED))
        for path in ["/usr/local/bin/torus-worker"] + [f"{CARRIED}/{name}" for name in carried]:
            for name, resolved in loader_list(self.root, self.env, path):
                with self.subTest(library=path, needs=name):
                    self.assertIsNotNone(resolved, f"{path}: {name} not found in the image")
                    self.assertFalse(resolved.startswith("/usr/local/cuda"), resolved)
                    self.assertTrue(os.path.lexists(self.root + resolved), resolved)
                    if CUDA_FAMILIES.match(name):
                        self.assertEqual(os.path.dirname(resolved), CARRIED, f"{name}: from {resolved}")
        needed = {name for name, _ in loader_list(self.root, self.env, "/usr/local/bin/torus-worker")}
        for lib in ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcudnn.so.9", "libnccl.so.2"):
            self.assertIn(lib, needed)
        readelf = subprocess.run(["readelf", "-d", self.root + "/usr/local/bin/torus-worker"], capture_output=True,
                                 text=True, check=True).stdout
        self.assertNotIn("/usr/local/cuda", readelf)

    def test_what_the_cuda_libraries_open_at_run_time_is_carried(self):
        carried = os.listdir(self.root + CARRIED)
        for name in carried:
            for opened in sorted(opened_names(os.path.join(self.root + CARRIED, name))):
                if CUDA_FAMILIES.match(opened) and not DRIVER.match(opened):
                    with self.subTest(library=name, opens=opened):
                        self.assertTrue(any(c.startswith(opened) for c in carried), f"{name} opens {opened}")
        for engine in ("libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9",
                       "libcudnn_heuristic.so.9", "libnvrtc.so.13", "libnvrtc-builtins.so.13.0"):
            self.assertIn(engine, carried)
        self.assertFalse([c for c in carried if DRIVER.match(c)], "the driver's libraries are the node's")

    def test_every_carried_library_has_its_licence_listed(self):
        debian, wheels, libraries = packages_txt(self.root)
        for name in os.listdir(self.root + CARRIED):
            with self.subTest(library=name):
                self.assertIn(name, libraries, "packages.txt names no wheel for it")
                self.assertIn(libraries[name], wheels)
        for wheel, licences in wheels.items():
            for licence in licences:
                self.assertGreater(os.path.getsize(self.root + licence), 0, f"{wheel}: {licence}")
        for name, resolved in loader_list(self.root, self.env, "/usr/local/bin/torus-worker"):
            if resolved and os.path.dirname(resolved) != CARRIED:
                with self.subTest(library=resolved):
                    package = debian_owner(resolved)
                    self.assertIn(package, debian)
                    self.assertTrue(os.path.exists(self.root + debian[package][0]), debian[package][0])

    def test_the_worker_starts_as_nonroot_from_a_read_only_root(self):
        job = (ROOT / "examples/cifar10-resnet9.yaml").read_text()
        script = (f"set -e; r='{self.root}'; mount --bind \"$r\" \"$r\"; mount -o remount,bind,ro \"$r\"; "
                  "mount -t tmpfs -o mode=1777 tmpfs \"$r/tmp\"; cat >\"$r/tmp/job.yaml\"; "
                  "if touch \"$r/usr/probe\" 2>/dev/null; then echo 'root is writable'; exit 3; fi; "
                  f"exec chroot --userspec={NONROOT}:{NONROOT} \"$r\" /usr/local/bin/torus-worker --job /tmp/job.yaml")
        env = {**self.env, "PATH": self.env["PATH"] + ":/usr/sbin:/usr/bin:/sbin:/bin"}
        result = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], input=job,
                                env=env, capture_output=True, text=True, timeout=300)
        output = result.stdout + result.stderr
        self.assertNotIn("error while loading shared libraries", output)
        self.assertNotIn("root is writable", output)
        # Here no GPU and no driver: the worker ran its main, read the job, and stopped at the CUDA runtime.
        self.assertRegex(output, r"torus-worker: error: .*(CUDA|cuda|driver)", output)


def main():
    global BUILD
    if os.environ.get("TORUS_GPU_IMAGE") != "1":
        print("SKIP: TORUS_GPU_IMAGE is not 1: the GPU image downloads 1.1 GB of NVIDIA wheels from PyPI and compiles "
              "the CUDA backend (docs/building.md, \"GPU variant\")")
        return SKIP
    if os.geteuid() != 0:
        print("SKIP: not root: the checks chroot into the image's root and mount it read-only")
        return SKIP
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    BUILD = os.path.abspath(sys.argv[1])
    os.makedirs(BUILD, exist_ok=True)
    return 0 if unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[2:], exit=False).result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
