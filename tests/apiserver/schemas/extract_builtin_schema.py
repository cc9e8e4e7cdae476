#!/usr/bin/python3
"""Extracts the built-in kinds' field schema the stand-in validates against (builtin_schema.cc) from the official
Kubernetes Python client's generated models: each model class's `openapi_types` (attribute -> type) and
`attribute_map` (attribute -> JSON key), read with `ast` (no import: the models need pydantic). The stand-in did not
write this schema: it is the Kubernetes OpenAPI document as the client generator saw it.

Usage (the wheel from PyPI, e.g. `python3 -m pip download --no-deps kubernetes==37.0.2`):
  /usr/bin/python3 tests/apiserver/schemas/extract_builtin_schema.py kubernetes-37.0.2-py2.py3-none-any.whl \
      > tests/apiserver/schemas/builtin-kinds.json

Output, compact JSON: {"source": ..., "kinds": {"apps/v1 Deployment": "V1Deployment", ...},
"types": {"V1DeploymentSpec": {"replicas": "int", "template": "V1PodTemplateSpec", ...}, ...}} with only the types
the kinds reach. Types: int, float, bool, str, datetime, date, object (anything: IntOrString, RawExtension),
List[T], Dict[str, T], or a model name.
"""
import ast
import json
import re
import sys
import zipfile

# The built-in kinds the stand-in validates, and their model classes.
KINDS = {
    "v1 Pod": "V1Pod",
    "v1 Service": "V1Service",
    "v1 ConfigMap": "V1ConfigMap",
    "v1 Secret": "V1Secret",
    "v1 ServiceAccount": "V1ServiceAccount",
    "v1 PersistentVolumeClaim": "V1PersistentVolumeClaim",
    "v1 Namespace": "V1Namespace",
    "apps/v1 Deployment": "V1Deployment",
    "policy/v1 PodDisruptionBudget": "V1PodDisruptionBudget",
    "rbac.authorization.k8s.io/v1 Role": "V1Role",
    "rbac.authorization.k8s.io/v1 RoleBinding": "V1RoleBinding",
    "rbac.authorization.k8s.io/v1 ClusterRole": "V1ClusterRole",
    "rbac.authorization.k8s.io/v1 ClusterRoleBinding": "V1ClusterRoleBinding",
    "scheduling.k8s.io/v1 PriorityClass": "V1PriorityClass",
}


def class_dict(tree, name):
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return ast.literal_eval(node.value)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    return None


def main():
    wheel = zipfile.ZipFile(sys.argv[1])
    version = ""
    models = {}
    for path in wheel.namelist():
        if path == "kubernetes/__init__.py":
            version = re.search(r'__version__ = "([^"]+)"', wheel.read(path).decode()).group(1)
        if not re.fullmatch(r"kubernetes/client/models/[a-z][^/]*\.py", path):
            continue
        text = wheel.read(path).decode()
        tree = ast.parse(text)
        classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
        types, keys = class_dict(tree, "openapi_types"), class_dict(tree, "attribute_map")
        if len(classes) != 1 or types is None or keys is None:
            continue
        models[classes[0]] = {keys[attr]: t for attr, t in types.items()}
        document = re.search(r"The version of the OpenAPI document: (\S+)", text)
        openapi = document.group(1) if document else "?"
    reached = {}
    pending = list(KINDS.values())
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        if name not in models:
            sys.exit(f"extract_builtin_schema: model {name} not in {sys.argv[1]}")
        reached[name] = models[name]
        for t in models[name].values():
            pending.extend(m for m in re.findall(r"[A-Z]\w*", t) if m not in ("List", "Dict") and m not in reached)
    print(json.dumps({"source": f"PyPI kubernetes {version} (OpenAPI document {openapi}), kubernetes/client/models",
                      "kinds": KINDS, "types": dict(sorted(reached.items()))},
                     separators=(",", ":"), sort_keys=False))


if __name__ == "__main__":
    main()
