#!/usr/bin/python3
"""Static checks of docker/Dockerfile.* (no Docker engine runs on our machines):
every COPY source exists in the repository (and is not excluded by the Dockerfile's .dockerignore), or was
produced by an earlier stage from a binary that CMake builds; base images are pinned; the final stage runs as a
fixed non-root user that matches the Helm chart; the entrypoint is a binary the image contains.

Run by tests/packaging/packaging_test.cc; standalone: /usr/bin/python3 tests/packaging/dockerfile_test.py
"""
import fnmatch
import pathlib
import re
import shlex
import unittest

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCKERFILES = {"operator": ROOT / "docker" / "Dockerfile.operator", "worker": ROOT / "docker" / "Dockerfile.worker"}
# The binary each image exists for.
MAIN_BINARY = {"operator": "torus", "worker": "torus-worker"}


def instructions(path):
    """[(KEYWORD, arguments)] with line continuations joined and comments dropped."""
    out, pending = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line.startswith("#") or not line:
            continue  # comments, also inside a continued instruction, are dropped by Docker's parser
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, rest = line.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    assert not pending, f"{path}: ends inside a continued instruction"
    return out


def stages(path):
    """[{'image', 'name', 'instructions'}] in order."""
    result = []
    for keyword, args in instructions(path):
        if keyword == "FROM":
            m = re.fullmatch(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", args, re.IGNORECASE)
            assert m, f"{path}: cannot read FROM {args}"
            result.append({"image": m.group(1), "name": m.group(2), "instructions": []})
        else:
            assert result, f"{path}: {keyword} before FROM"
            result[-1]["instructions"].append((keyword, args))
    return result


def copy_parts(args):
    """(flags, sources, destination) of a COPY/ADD in shell form."""
    words = shlex.split(args)
    flags = {}
    while words and words[0].startswith("--"):
        key, _, value = words.pop(0)[2:].partition("=")
        flags[key] = value
    return flags, words[:-1], words[-1]


def cmake_executables():
    names = set()
    for cmake in ROOT.rglob("CMakeLists.txt"):
        if any(part.startswith("build") for part in cmake.relative_to(ROOT).parts[:-1]):
            continue  # build trees
        names.update(re.findall(r"add_executable\(\s*([A-Za-z0-9_.+-]+)", cmake.read_text()))
    return names


def dockerignore_allows(path, relative):
    """Whether a context path survives <Dockerfile>.dockerignore (last matching rule wins, as in Docker)."""
    ignore = path.with_name(path.name + ".dockerignore")
    if not ignore.exists():
        return True
    allowed = True
    for raw in ignore.read_text().splitlines():
        rule = raw.strip()
        if not rule or rule.startswith("#"):
            continue
        negate = rule.startswith("!")
        pattern = rule[1:] if negate else rule
        pattern = pattern.rstrip("/")
        if pattern == "**" or fnmatch.fnmatch(relative, pattern) or relative.startswith(pattern + "/"):
            allowed = negate
    return allowed


def is_pinned(image):
    """A digest, or a tag that names a version (not `latest`, not a bare release name)."""
    if "@sha256:" in image:
        return True
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and tag != "latest" and re.search(r"\d", tag) is not None


class Dockerfiles(unittest.TestCase):
    def test_base_images_are_pinned(self):
        for kind, path in DOCKERFILES.items():
            names = set()
            for stage in stages(path):
                if stage["image"] in names:
                    continue  # FROM an earlier stage
                self.assertTrue(is_pinned(stage["image"]), f"{path}: base image {stage['image']} is not pinned")
                if stage["name"]:
                    names.add(stage["name"])

    def test_every_copy_source_exists_or_is_built(self):
        executables = cmake_executables()
        for kind, path in DOCKERFILES.items():
            built = {}  # stage name -> its RUN text
            for stage in stages(path):
                run_text = " ".join(a for k, a in stage["instructions"] if k == "RUN")
                for keyword, args in stage["instructions"]:
                    if keyword not in ("COPY", "ADD"):
                        continue
                    self.assertEqual(keyword, "COPY", f"{path}: use COPY, not ADD ({args})")
                    flags, sources, _ = copy_parts(args)
                    for source in sources:
                        if "from" in flags:
                            self.check_stage_output(path, built, flags["from"], source, executables)
                        else:
                            self.check_context_file(path, source)
                if stage["name"]:
                    built[stage["name"]] = run_text

    def check_context_file(self, path, source):
        matches = list(ROOT.glob(source)) if any(c in source for c in "*?[") else [ROOT / source]
        self.assertTrue(matches and all(m.exists() for m in matches), f"{path}: COPY {source}: not in the repository")
        relative = source.rstrip("/") or "."
        self.assertTrue(dockerignore_allows(path, relative),
                        f"{path}: COPY {source}: excluded by {path.name}.dockerignore")

    def check_stage_output(self, path, built, stage, source, executables):
        self.assertIn(stage, built, f"{path}: COPY --from={stage}: no earlier stage of that name")
        run_text = built[stage]
        self.assertIn(source.rstrip("/"), run_text, f"{path}: COPY --from={stage} {source}: no RUN there makes it")
        if source.endswith("/"):
            return  # a folder the stage fills (shared libraries)
        binary = pathlib.PurePosixPath(source).name
        self.assertIn(binary, executables,
                      f"{path}: COPY --from={stage} {source}: '{binary}' is not an add_executable() target in any "
                      "CMakeLists.txt (the binary this image ships is not built yet)")
        self.assertRegex(run_text, rf"--target\s+{re.escape(binary)}\b",
                         f"{path}: stage {stage} never builds the '{binary}' target")

    def test_final_stage_runs_as_the_charts_non_root_user(self):
        chart_values = yaml.safe_load((ROOT / "charts" / "torus-operator" / "values.yaml").read_text())
        chart_uid = chart_values["podSecurityContext"]["runAsUser"]
        for kind, path in DOCKERFILES.items():
            final = stages(path)[-1]
            users = [a for k, a in final["instructions"] if k == "USER"]
            self.assertTrue(users, f"{path}: the final stage sets no USER (it would run as root)")
            uid = users[-1].split(":")[0]
            self.assertRegex(uid, r"^\d+$", f"{path}: USER {users[-1]}: use a numeric UID (runAsNonRoot checks it)")
            self.assertNotEqual(int(uid), 0, f"{path}: USER is root")
            if kind == "operator":
                self.assertEqual(int(uid), chart_uid, f"{path}: USER {uid} differs from the chart's runAsUser")

    def test_entrypoint_is_the_shipped_binary(self):
        for kind, path in DOCKERFILES.items():
            final = stages(path)[-1]
            entry = [a for k, a in final["instructions"] if k == "ENTRYPOINT"]
            self.assertTrue(entry, f"{path}: no ENTRYPOINT")
            self.assertTrue(entry[-1].startswith("["), f"{path}: ENTRYPOINT in exec form, so signals reach it")
            destinations = [copy_parts(a)[2] for k, a in final["instructions"] if k == "COPY"]
            program = yaml.safe_load(entry[-1])[0]
            self.assertIn(program, destinations, f"{path}: ENTRYPOINT {program} is not copied into the image")
            self.assertEqual(pathlib.PurePosixPath(program).name, MAIN_BINARY[kind])

    def test_the_checker_notices_problems(self):
        # Guards the checks above against passing vacuously.
        self.assertFalse(is_pinned("debian:bookworm"))
        self.assertFalse(is_pinned("nvidia/cuda:latest"))
        self.assertFalse(is_pinned("ubuntu"))
        self.assertTrue(is_pinned("debian:bookworm-20250929-slim"))
        self.assertTrue(is_pinned("debian@sha256:" + "0" * 64))
        self.assertFalse(dockerignore_allows(DOCKERFILES["operator"], "build"))
        self.assertFalse(dockerignore_allows(DOCKERFILES["operator"], ".git"))
        self.assertTrue(dockerignore_allows(DOCKERFILES["operator"], "common"))
        self.assertIn("torus", cmake_executables())


if __name__ == "__main__":
    unittest.main(verbosity=2)
