#!/usr/bin/python3
"""Builds Torus's container images as OCI image archives, without a container engine (docs/building.md, "Images").

An image is a minimal Debian bookworm root made the way distroless images are: the Debian packages that hold the
shared libraries the binaries load (found with ldd and `dpkg -S`; their files as installed here, `dpkg -L`, so the
image runs exactly what the build linked), plus base-files,
netbase and the CA bundle; /etc/passwd and /etc/group with the non-root user 65532 (distroless's "nonroot"); the
stripped binaries in /usr/local/bin. Nothing runs inside the root (no maintainer scripts, no shell needed), which
is why no chroot, mmdebstrap or Docker daemon is involved.

Reproducible: every tar entry is written in sorted order with fixed owners, modes from the packages and the time
SOURCE_DATE_EPOCH (the commit's time by default), gzip without a name or time, JSON with sorted keys: the same
commit and the same installed packages give the same digests (tests/packaging/images_test.py builds twice).

The archive holds an OCI image layout (oci-layout, index.json, blobs/sha256/...) and Docker's manifest.json, so
`kind load image-archive`, `ctr images import`, `skopeo copy oci-archive:...` and `docker load` all read it.

The GPU variant (scripts/images.sh --gpu) adds a layer of NVIDIA's redistributable CUDA libraries taken from their
PyPI wheels (--wheel FILE.whl:LIB,...: the named libraries, and the wheel's licence files under
/usr/share/doc/<wheel>/), listed with their versions in /usr/share/doc/torus/packages.txt beside the Debian packages.

usage: images.py --name NAME --tag TAG --binary PATH [--binary PATH...] --entrypoint PATH [--cmd ARG...]
                 [--extra-lib-dir DIR...] [--wheel FILE.whl:LIB[,LIB...]...] [--env KEY=VALUE...]
                 [--label KEY=VALUE...] --work DIR --out FILE.tar [--revision REV]
"""
import argparse
import email.parser
import fnmatch
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

ARCH = "amd64"
NONROOT = 65532
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Packages every image carries beyond the libraries' own: /etc/os-release and the FHS skeleton, /etc/services and
# /etc/protocols (getaddrinfo's service names), the Mozilla CA set (TLS to the API server and to object stores).
BASE_PACKAGES = ["base-files", "netbase", "ca-certificates", "libc6"]
# What an image needs none of: documentation beyond the licences, manuals, translations, lintian overrides.
PRUNE = [r"^usr/share/doc/[^/]+/(?!copyright$).*", r"^usr/share/(man|info|lintian|locale|bug|gcc|gdb)(/|$)",
         r"^usr/share/doc-base(/|$)"]


class ImageError(Exception):
    pass


def run(argv, **kwargs):
    try:
        return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs).stdout
    except FileNotFoundError as e:
        raise ImageError(f"{argv[0]}: not found ({e})") from e
    except subprocess.CalledProcessError as e:
        raise ImageError(f"{' '.join(argv)}: exit {e.returncode}: {e.stderr.strip()}") from e


# ---- which packages ---------------------------------------------------------------------------------------------

def shared_libraries(binary, env=None):
    """Every shared library `binary` loads (ldd's resolved paths), the loader included."""
    libs = []
    for line in run(["ldd", binary], env=env).splitlines():
        line = line.strip()
        if "not found" in line:
            raise ImageError(f"{binary}: {line}: the image would not start")
        m = re.match(r"\S+ => (/\S+)", line) or re.match(r"(/\S+) \(", line)
        if m:
            libs.append(m.group(1))
    return libs


def owning_package(path, extra_dirs):
    """The Debian package that installed `path` (tried as given, resolved, and across the merged /usr), or None
    for a file under one of `extra_dirs` (copied as it is: the CUDA libraries of the GPU variant)."""
    if any(os.path.realpath(path).startswith(os.path.realpath(d) + "/") for d in extra_dirs):
        return None
    candidates = []
    for p in (path, os.path.realpath(path)):
        candidates += [p, p[4:] if p.startswith("/usr/") else "/usr" + p]
    for p in candidates:
        r = subprocess.run(["dpkg-query", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":", 1)[0].strip()
    raise ImageError(f"{path}: no installed Debian package holds it (dpkg -S); the image takes libraries from "
                     "Debian's packages only")


def package_versions(packages):
    out = {}
    for p in sorted(packages):
        version = run(["dpkg-query", "-W", "-f", "${Version}", p]).strip()
        if not version:
            raise ImageError(f"{p}: not installed (dpkg-query); install it or rebuild")
        out[p] = version
    return out


# The merged /usr of Debian bookworm: /bin, /lib, /lib64 and /sbin are links into /usr.
MERGED = ("bin", "lib", "lib64", "sbin")


def image_path(path):
    """Where a package's file lives in the image's merged-/usr root (relative)."""
    rel = path.lstrip("/")
    top = rel.split("/", 1)[0]
    return "usr/" + rel if top in MERGED else rel


def copy_packages(versions, root):
    """Every file the packages installed here (`dpkg -L`), copied with its mode: the exact files the build linked
    against, with no download (a mirror keeps only the newest point release, so the installed .deb may be gone).
    Documentation other than the licences is left out (PRUNE)."""
    for top in MERGED:
        os.makedirs(os.path.join(root, "usr", top), exist_ok=True)
        os.symlink("usr/" + top, os.path.join(root, top))
    pruned = [re.compile(r) for r in PRUNE]
    for p in sorted(versions):
        for path in run(["dpkg-query", "-L", p]).splitlines():
            if path in ("/.", "") or not os.path.lexists(path):
                continue  # a path dpkg was told to leave out (path-exclude) is not on disk
            rel = image_path(path)
            if any(r.match(rel) for r in pruned) or rel in MERGED:
                continue
            dest = os.path.join(root, rel)
            if os.path.isdir(path) and not os.path.islink(path):
                os.makedirs(dest, exist_ok=True)
                os.chmod(dest, os.stat(path).st_mode & 0o7777)
                continue
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            if os.path.lexists(dest):
                continue  # a file two packages list (a shared folder's link)
            if os.path.islink(path):
                os.symlink(os.readlink(path), dest)
            else:
                shutil.copyfile(path, dest)
                os.chmod(dest, os.stat(path).st_mode & 0o7777)
        licence = f"/usr/share/doc/{p}/copyright"
        if os.path.islink(os.path.dirname(licence)) and os.path.isfile(licence):
            # Debian's doc links (libgcc-s1 -> gcc-12-base): the licence lives in the folder the link names.
            dest = os.path.join(root, os.path.realpath(licence).lstrip("/"))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(licence, dest)
        if not os.path.exists(os.path.join(root, licence.lstrip("/"))):
            raise ImageError(f"{p}: /usr/share/doc/{p}/copyright is missing: the image must carry every licence")


def write(root, rel, text, mode=0o644):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def add_system_files(root, versions, wheels=()):
    write(root, "etc/passwd", "root:x:0:0:root:/root:/sbin/nologin\n"
          "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
          f"nonroot:x:{NONROOT}:{NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n")
    write(root, "etc/group", f"root:x:0:\nnogroup:x:65534:\nnonroot:x:{NONROOT}:\n")
    # What update-ca-certificates would have made at install time: the bundle OpenSSL reads by default.
    cas = os.path.join(root, "usr/share/ca-certificates")
    bundle = ""
    for dirpath, _, filenames in sorted(os.walk(cas)):
        for f in sorted(filenames):
            if f.endswith(".crt"):
                with open(os.path.join(dirpath, f)) as c:
                    bundle += c.read()
    write(root, "etc/ssl/certs/ca-certificates.crt", bundle)
    lines = [f"{p} {v} /usr/share/doc/{p}/copyright" for p, v in versions.items()]
    write(root, "usr/share/doc/torus/packages.txt",
          "# Debian packages in this image: name, version, licence file (Debian's copyright format)\n" +
          "\n".join(lines) + "\n" + wheel_listing(wheels))
    for d, mode in (("tmp", 0o1777), ("root", 0o700), ("home/nonroot", 0o700)):
        os.makedirs(os.path.join(root, d), exist_ok=True)
        os.chmod(os.path.join(root, d), mode)


def add_binaries(root, binaries, extra_libs):
    for b in binaries:
        dest = os.path.join(root, "usr/local/bin", os.path.basename(b))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        run(["strip", "--strip-unneeded", "-o", dest, b])
        os.chmod(dest, 0o755)
    for lib in sorted(extra_libs):
        dest = os.path.join(root, "usr/local/lib/torus", os.path.basename(lib))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(os.path.realpath(lib), dest)
        os.chmod(dest, 0o644)


def add_file(root, source, dest):
    """A file of the image's own (a test's program), executable, at `dest`."""
    path = os.path.join(root, dest.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    shutil.copyfile(source, path)
    os.chmod(path, 0o755)


# ---- PyPI wheels: NVIDIA's redistributable CUDA libraries (the GPU variant) ---------------------------------------

# Beside the --extra-lib-dir libraries, on the image's LD_LIBRARY_PATH. The driver's libraries (libcuda.so.1,
# libnvidia-ml.so.1) are not carried: they must match the node's kernel module, and the NVIDIA container runtime
# mounts the node's; the CUDA libraries open them at run time (dlopen), so no ldd names them.
WHEEL_LIB_DIR = "usr/local/lib/torus"


class Wheel:
    """What an image takes from one wheel (`FILE.whl:PATTERN,...`): the libraries whose names match the shell
    patterns (under the wheel's lib/ folders), its licence files (the dist-info's licenses/), and its name and
    version (the dist-info's METADATA)."""

    def __init__(self, spec):
        path, _, patterns = spec.partition(":")
        if not path.endswith(".whl") or not patterns:
            raise ImageError(f"--wheel {spec!r}: expected FILE.whl:LIB[,LIB...]")
        self.path = path
        try:
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
                infos = sorted({n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")})
                if len(infos) != 1:
                    raise ImageError(f"{path}: expected one *.dist-info folder, found {infos}")
                metadata = email.parser.Parser().parsestr(z.read(infos[0] + "/METADATA").decode())
        except (OSError, zipfile.BadZipFile, KeyError) as e:
            raise ImageError(f"{path}: not a readable wheel ({e})") from e
        self.name, self.version = metadata["Name"], metadata["Version"]
        if not self.name or not self.version:
            raise ImageError(f"{path}: {infos[0]}/METADATA names no Name or Version")
        licences = infos[0] + "/licenses/"
        self.licences = {n[len(licences):]: n for n in names if n.startswith(licences) and not n.endswith("/")}
        if not self.licences:
            raise ImageError(f"{path}: no licence file in {licences}: the image must carry every licence")
        libraries = {n.rsplit("/", 1)[1]: n for n in names if n.split("/")[-2:-1] == ["lib"] and ".so" in n}
        self.libraries = {}
        for pattern in patterns.split(","):
            matched = fnmatch.filter(libraries, pattern)
            if not matched:
                raise ImageError(f"{path}: no library matches {pattern!r} (it holds {sorted(libraries)})")
            self.libraries.update((name, libraries[name]) for name in matched)

    def licence_paths(self):
        return [f"/usr/share/doc/{self.name}/{rel}" for rel in sorted(self.licences)]


def unpack_wheels(wheels, root):
    """The wheels' libraries and licences, written into `root`; returns the libraries' paths there."""
    owners, paths = {}, []
    for w in wheels:
        with zipfile.ZipFile(w.path) as z:
            for rel, member in sorted(w.licences.items()):
                extract(z, member, os.path.join(root, "usr/share/doc", w.name, rel))
            for name, member in sorted(w.libraries.items()):
                if name in owners:
                    raise ImageError(f"{name}: in both {owners[name]} and {w.name}")
                owners[name] = w.name
                paths.append(os.path.join(root, WHEEL_LIB_DIR, name))
                extract(z, member, paths[-1])
    return paths


def extract(z, member, dest):
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with z.open(member) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    os.chmod(dest, 0o644)


def wheel_listing(wheels):
    """packages.txt's part for the wheels (none in the CPU images): each wheel, and which wheel each library is from."""
    if not wheels:
        return ""
    text = (f"# PyPI wheels in this image (NVIDIA's redistributable CUDA libraries, /{WHEEL_LIB_DIR}): name, version, "
            "licence files\n")
    for w in sorted(wheels, key=lambda w: w.name):
        text += f"{w.name} {w.version} {','.join(w.licence_paths())}\n"
    text += f"# The libraries in /{WHEEL_LIB_DIR} taken from those wheels: file, wheel\n"
    rows = sorted((name, w.name) for w in wheels for name in w.libraries)
    return text + "".join(f"{name} {wheel}\n" for name, wheel in rows)


# ---- OCI --------------------------------------------------------------------------------------------------------

def owner(rel):
    """Everything belongs to root except the non-root user's home."""
    return NONROOT if rel == "home/nonroot" or rel.startswith("home/nonroot/") else 0


def layer_tar(root, epoch):
    """A deterministic tar of `root`: sorted paths, fixed owners and times, the modes as unpacked."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in dirnames + sorted(filenames):
                paths.append(os.path.relpath(os.path.join(dirpath, name), root))
        seen = {}
        for rel in sorted(paths):
            full = os.path.join(root, rel)
            info = tar.gettarinfo(full, arcname=rel)
            st = os.lstat(full)
            if info.isreg() and st.st_nlink > 1:
                key = (st.st_dev, st.st_ino)
                if key in seen:
                    info = tarfile.TarInfo(rel)
                    info.type, info.linkname = tarfile.LNKTYPE, seen[key]
                else:
                    seen[key] = rel
            info.uid = info.gid = owner(rel)
            info.uname = info.gname = ""
            info.mtime = epoch
            info.pax_headers = {}
            if info.isreg():
                with open(full, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return buf.getvalue()


def gz(data):
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as g:
        g.write(data)
    return out.getvalue()


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical(doc):
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def iso(epoch):
    import datetime
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_archive(out, name, tag, layers, config_body, epoch):
    """The OCI layout + Docker manifest.json as one tar, blobs named by digest."""
    blobs = {}
    layer_descs, diff_ids, history = [], [], []
    for created_by, data in layers:
        compressed = gz(data)
        blobs[sha(compressed)] = compressed
        layer_descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                            "digest": sha(compressed), "size": len(compressed)})
        diff_ids.append(sha(data))
        history.append({"created": iso(epoch), "created_by": created_by})
    config = {"architecture": ARCH, "os": "linux", "created": iso(epoch), "config": config_body,
              "rootfs": {"type": "layers", "diff_ids": diff_ids}, "history": history}
    config_bytes = canonical(config)
    blobs[sha(config_bytes)] = config_bytes
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": sha(config_bytes), "size": len(config_bytes)},
                "layers": layer_descs}
    manifest_bytes = canonical(manifest)
    blobs[sha(manifest_bytes)] = manifest_bytes
    reference = f"{name}:{tag}"
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                            "digest": sha(manifest_bytes), "size": len(manifest_bytes),
                            "annotations": {"io.containerd.image.name": reference,
                                            "org.opencontainers.image.ref.name": tag}}]}
    docker = [{"Config": "blobs/sha256/" + sha(config_bytes)[7:], "RepoTags": [reference],
               "Layers": ["blobs/sha256/" + d["digest"][7:] for d in layer_descs]}]
    files = {"oci-layout": canonical({"imageLayoutVersion": "1.0.0"}), "index.json": canonical(index),
             "manifest.json": canonical(docker)}
    for digest, data in blobs.items():
        files["blobs/sha256/" + digest[7:]] = data
    tmp = out + ".new"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, epoch
            tar.addfile(info)
        for path in sorted(files):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(files[path]), 0o644, epoch
            tar.addfile(info, io.BytesIO(files[path]))
    os.replace(tmp, out)
    return {"reference": reference, "digest": sha(manifest_bytes), "compressedBytes": sum(len(b) for b in blobs.values()),
            "uncompressedBytes": sum(len(d) for _, d in layers), "sourceDateEpoch": epoch,
            "revision": config["config"].get("Labels", {}).get("org.opencontainers.image.revision", "")}


def needed_packages(binaries, extra_dirs, ldd_env, carried):
    """The Debian packages the binaries (and the wheels' libraries, `carried`) load, and the --extra-lib-dir
    libraries to copy; a library of `carried` is in the image already."""
    packages, extra_libs = set(BASE_PACKAGES), set()
    carried_real = {os.path.realpath(c) for c in carried}
    for b in binaries + carried:
        for lib in shared_libraries(b, ldd_env):
            if os.path.realpath(lib) in carried_real:
                continue
            p = owning_package(lib, extra_dirs)
            if p is None:
                extra_libs.add(lib)
            else:
                packages.add(p)
    for d in extra_dirs:  # libraries the others load at run time (cuDNN's engines, cuBLASLt): the whole folder
        for f in sorted(os.listdir(d)):
            if ".so" in f and os.path.isfile(os.path.join(d, f)):
                extra_libs.add(os.path.join(d, f))
    return packages, extra_libs


def key_values(pairs, option, separator="="):
    for pair in pairs or []:
        if separator not in pair or pair.startswith(separator):
            raise ImageError(f"{option} {pair!r}: expected KEY{separator}VALUE")
    return [pair.split(separator, 1) for pair in pairs or []]


def build(args):
    os.umask(0o022)  # the folders made here get the same modes whoever runs it
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    extra_dirs = args.extra_lib_dir or []
    wheels = [Wheel(spec) for spec in args.wheel or []]
    os.makedirs(args.work, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        base, cuda, app = (os.path.join(tmp, d) for d in ("base", "cuda", "app"))
        for d in (base, cuda, app):
            os.makedirs(d)
        # The wheels' libraries first, so that ldd resolves the binary against the very files the image carries
        # (LD_LIBRARY_PATH comes before the build tree's RUNPATH), never against the toolkit the build linked.
        carried = unpack_wheels(wheels, cuda)
        ldd_env = {**os.environ, "LD_LIBRARY_PATH": os.path.join(cuda, WHEEL_LIB_DIR)} if wheels else None
        packages, extra_libs = needed_packages(args.binary, extra_dirs, ldd_env, carried)
        packages.update(args.package or [])
        versions = package_versions(packages)
        copy_packages(versions, base)
        add_system_files(base, versions, wheels)
        add_binaries(app, args.binary, extra_libs)
        for source, dest in key_values(args.file, "--file", ":"):
            add_file(app, source, dest)
        layers = [(f"scripts/images.py: {len(versions)} Debian bookworm packages", layer_tar(base, epoch))]
        if wheels:  # a layer of its own: a new torus-worker reuses it (a node pulls its gigabyte once)
            layers.append((f"scripts/images.py: {len(wheels)} PyPI wheels ({', '.join(w.name for w in wheels)})",
                           layer_tar(cuda, epoch)))
        layers.append((f"scripts/images.py: {', '.join(os.path.basename(b) for b in args.binary)}",
                       layer_tar(app, epoch)))
    env = [f"PATH={PATH_ENV}"]
    if extra_libs or wheels:
        env.append("LD_LIBRARY_PATH=/usr/local/lib/torus")
    env += [f"{k}={v}" for k, v in key_values(args.env, "--env")]
    labels = {"org.opencontainers.image.title": os.path.basename(args.name),
              "org.opencontainers.image.version": args.tag,
              "org.opencontainers.image.source": "https://github.com/torus-dev/torus",
              "org.opencontainers.image.created": iso(epoch)}
    if args.revision:
        labels["org.opencontainers.image.revision"] = args.revision
    labels.update(key_values(args.label, "--label"))
    config = {"User": f"{NONROOT}:{NONROOT}", "Env": env, "Entrypoint": [args.entrypoint], "Cmd": args.cmd or [],
              "WorkingDir": "/", "Labels": labels}
    return write_archive(args.out, args.name, args.tag, layers, config, epoch)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--binary", action="append", required=True)
    parser.add_argument("--entrypoint", required=True)
    parser.add_argument("--cmd", action="append")
    parser.add_argument("--extra-lib-dir", action="append")
    parser.add_argument("--wheel", action="append", help="FILE.whl:LIB[,LIB...]: libraries (shell patterns) to take "
                        "from a wheel into /usr/local/lib/torus, with its licences")
    parser.add_argument("--package", action="append", help="a Debian package carried whole (a test image's python)")
    parser.add_argument("--file", action="append", help="SOURCE:DEST, a file put in the image, executable")
    parser.add_argument("--env", action="append", help="KEY=VALUE added to the image config's Env")
    parser.add_argument("--label", action="append", help="KEY=VALUE added to the image config's Labels")
    parser.add_argument("--work", required=True, help="a folder for the staging roots")
    parser.add_argument("--out", required=True)
    parser.add_argument("--revision", default="")
    args = parser.parse_args()
    try:
        result = build(args)
    except ImageError as e:
        print(f"images.py: {args.name}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
