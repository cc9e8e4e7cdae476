#!/usr/bin/python3
"""The images are reproducible and are what a cluster can run (issue 37): scripts/images.sh run once more, into a
folder of its own, under another umask and temporary folder, gives the very digests the product_images build gave
(the same commit: SOURCE_DATE_EPOCH, sorted entries, fixed owners and times); and each archive is a well-formed OCI
image layout (every blob's digest checked, the manifest's config and layers present, index.json naming the image as
containerd reads it, Docker's manifest.json beside it) whose config runs as 65532 with the chart's repositories and
appVersion, and whose layers hold every file owned by root except the non-root user's home.

usage: images_test.py BUILD_IMAGES_FOLDER   (the product_images fixture's: build/images)
"""
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tarfile
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = None  # from the command line
NONROOT = 65532


def chart_names():
    chart = (ROOT / "charts" / "torus-operator" / "Chart.yaml").read_text()
    tag = [line.split('"')[1] for line in chart.splitlines() if line.startswith("appVersion:")][0]
    values = (ROOT / "charts" / "torus-operator" / "values.yaml").read_text().splitlines()
    repositories = [line.split()[1] for line in values if line.strip().startswith("repository:")]
    return tag, repositories


class Images(unittest.TestCase):
    def built(self, out):
        with open(os.path.join(out, "images.json")) as f:
            return {image["reference"]: image["digest"] for image in json.load(f)}

    def test_a_second_build_gives_the_same_digests(self):
        first = self.built(os.path.join(BUILD, "out"))
        # The same commit: the first build's time and revision (a commit made since would change both).
        with open(os.path.join(BUILD, "out", "images.json")) as f:
            made = json.load(f)[0]
        with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "TORUS_IMAGES_BUILD": BUILD, "TORUS_IMAGES_OUT": out, "TMPDIR": tmp,
                   "SOURCE_DATE_EPOCH": str(made["sourceDateEpoch"]), "TORUS_IMAGES_REVISION": made["revision"]}
            result = subprocess.run(["bash", "-c", "umask 077 && exec bash " + str(ROOT / "scripts" / "images.sh")],
                                    env=env, capture_output=True, text=True, timeout=900)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            self.assertEqual(self.built(out), first)

    def test_each_archive_is_an_oci_layout_of_the_charts_image_run_as_nonroot(self):
        tag, repositories = chart_names()
        references = self.built(os.path.join(BUILD, "out"))
        self.assertEqual(sorted(references), sorted(f"{r}:{tag}" for r in repositories))
        for reference, digest in references.items():
            archive = os.path.join(BUILD, "out", f"{reference.split(':')[0].rsplit('/', 1)[1]}-{tag}.oci.tar")
            with tarfile.open(archive) as tar:
                files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
            blobs = {"sha256:" + name.rsplit("/", 1)[1]: data for name, data in files.items()
                     if name.startswith("blobs/sha256/")}
            for name, data in blobs.items():
                self.assertEqual("sha256:" + hashlib.sha256(data).hexdigest(), name)
            self.assertEqual(json.loads(files["oci-layout"]), {"imageLayoutVersion": "1.0.0"})
            [entry] = json.loads(files["index.json"])["manifests"]
            self.assertEqual(entry["digest"], digest)
            self.assertEqual(entry["annotations"]["io.containerd.image.name"], reference)
            manifest = json.loads(blobs[digest])
            config = json.loads(blobs[manifest["config"]["digest"]])
            self.assertEqual(config["config"]["User"], f"{NONROOT}:{NONROOT}")
            [docker] = json.loads(files["manifest.json"])
            self.assertEqual(docker["RepoTags"], [reference])
            self.assertEqual(len(config["rootfs"]["diff_ids"]), len(manifest["layers"]))
            for layer in manifest["layers"]:
                with tarfile.open(fileobj=__import__("io").BytesIO(blobs[layer["digest"]])) as t:
                    for m in t.getmembers():
                        owner = NONROOT if m.name == "home/nonroot" else 0
                        self.assertEqual((m.uid, m.gid), (owner, owner), f"{reference}: {m.name}")


if __name__ == "__main__":
    BUILD = os.path.abspath(sys.argv.pop(1))
    unittest.main(argv=[sys.argv[0], "-v"])
