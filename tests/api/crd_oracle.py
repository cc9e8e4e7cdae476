#!/usr/bin/env python3
"""An oracle for the TrainingJob CRD that shares no code with the API stand-in: Python's `jsonschema` (Debian's
python3-jsonschema, Draft 4, the JSON Schema OpenAPI v3.0 schemas are a dialect of) judges custom resources against
the CRD's openAPIV3Schema, read from the CRD's YAML with PyYAML. crd_oracle_test.cc compares its verdicts with the
stand-in's (tests/apiserver store.cc on tests/support/openapi_schema.cc).

JSON Schema does not know Kubernetes' structural-schema semantics. Each one the CRD uses is handled here, by name,
after the Kubernetes documentation ("Extend the Kubernetes API with CustomResourceDefinitions"), not after the
stand-in's code:

  routing            apiVersion must be group/version of a served version and kind the CRD's kind (else refused
                     at `apiVersion` / `kind`): the apiserver routes on them before any schema is looked at.
  status-subresource with `subresources.status`, a create (or main-resource write) ignores `status`; a status write
                     validates the whole object.
  object-meta        `metadata` is ObjectMeta, validated by the apiserver, not the schema: any ObjectMeta field is
                     admitted; the schema may only narrow name / generateName. A name (or generateName) is required
                     and must be a DNS-1123 subdomain.
  nullable           `nullable: true` admits null; a null in a field that is not nullable is pruned before
                     validation (so it counts as absent: a required one is then missing).
  unknown-fields     strict field validation (kubectl's default): a field the schema does not name is refused,
                     except under x-kubernetes-preserve-unknown-fields or in a map (additionalProperties); with
                     field validation Ignore, such fields are pruned silently.
  int-or-string      x-kubernetes-int-or-string: an integer or a string.
  list-type          x-kubernetes-list-type map (unique x-kubernetes-list-map-keys) / set (unique items): a duplicate
                     is refused at its index.
  formats            int32 / int64 (the value fits); date-time as kube-openapi's strfmt checks it: a calendar date
                     (month 1-12, the month's days), `T`, hour <= 23, minute and second <= 59, an optional fraction,
                     `Z` or +hh:mm; case-insensitive. Kubernetes checks these, JSON Schema only annotates them.
  exclusive bounds   OpenAPI v3.0's boolean exclusiveMinimum / exclusiveMaximum are Draft 4's own.

What the oracle does NOT cover, and refuses to judge (exit 2 naming it) rather than guess: CEL rules
(x-kubernetes-validations), defaults (`default`), x-kubernetes-embedded-resource, any other x-kubernetes-* key, and
any other format. Nor does it know admission (webhooks, quotas), the apiserver's ObjectMeta rules beyond the name,
or what a real apiserver does with YAML (cases arrive as JSON).

Usage: crd_oracle.py CRD.yaml CASES.json  -> prints a JSON list, one verdict per case:
  case:    {"document": {...}, "mode": "strict"|"ignore", "subresource": "main"|"status"}
  verdict: {"accepted": bool, "errors": [{"path": "spec.a[2].b", "kind": "unknown"|"required"|"invalid"|...}]}
Paths are written as Kubernetes writes them: `.` between fields, `[i]` for list items, `[key]` for map entries.
"""
import copy
import datetime
import json
import re
import sys

import jsonschema
import yaml

HANDLED_EXTENSIONS = {
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
}
HANDLED_FORMATS = {"int32", "int64", "date-time"}
# Keywords OpenAPI v3.0 shares with Draft 4 (and annotations that change nothing).
PLAIN_KEYWORDS = {
    "type", "properties", "required", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "items",
    "additionalProperties", "minProperties", "maxProperties", "allOf", "anyOf", "oneOf", "not", "description",
    "title", "example", "externalDocs", "nullable", "format",
}
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class Unhandled(Exception):
    """The CRD uses something this oracle cannot judge."""


def check_handled(schema, where="openAPIV3Schema"):
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") and key not in HANDLED_EXTENSIONS:
            raise Unhandled(f"{where}: {key} (not modelled by the oracle)")
        if key == "default":
            raise Unhandled(f"{where}: default (defaulting is not modelled by the oracle)")
        if key == "format" and value not in HANDLED_FORMATS:
            raise Unhandled(f"{where}: format {value} (not modelled by the oracle)")
        if not key.startswith("x-kubernetes-") and key not in PLAIN_KEYWORDS:
            raise Unhandled(f"{where}: {key} (unknown keyword)")
    for name, sub in schema.get("properties", {}).items():
        check_handled(sub, f"{where}.{name}")
    if isinstance(schema.get("items"), dict):
        check_handled(schema["items"], f"{where}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        check_handled(schema["additionalProperties"], f"{where}[*]")
    for combinator in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(combinator, []):
            check_handled(sub, f"{where}.{combinator}")


def to_draft4(schema, strict, path=()):
    """The structural schema as Draft 4 sees it: nullable, int-or-string and closed objects made explicit."""
    out = {k: v for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if schema.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    if schema.get("nullable") and "type" in out:
        out["type"] = (out["type"] if isinstance(out["type"], list) else [out["type"]]) + ["null"]
        if "enum" in out:
            out["enum"] = list(out["enum"]) + [None]
    out.pop("nullable", None)
    if "properties" in schema:
        out["properties"] = {k: to_draft4(v, strict, path + (k,)) for k, v in schema["properties"].items()}
    if isinstance(schema.get("items"), dict):
        out["items"] = to_draft4(schema["items"], strict, path + ("[]",))
    if isinstance(schema.get("additionalProperties"), dict):
        out["additionalProperties"] = to_draft4(schema["additionalProperties"], strict, path + ("[*]",))
    for combinator in ("allOf", "anyOf", "oneOf"):
        if combinator in schema:
            out[combinator] = [to_draft4(s, strict, path) for s in schema[combinator]]
    if "not" in schema:
        out["not"] = to_draft4(schema["not"], strict, path)
    is_object = schema.get("type") == "object"
    preserves = schema.get("x-kubernetes-preserve-unknown-fields", False)
    if path == ("metadata",):
        out.pop("additionalProperties", None)  # object-meta: ObjectMeta's other fields are the apiserver's
    elif strict and is_object and not preserves and "additionalProperties" not in schema:
        out["additionalProperties"] = False  # unknown-fields
    return out


def prune_nulls(schema, value):
    """nullable: a null in a non-nullable field the schema names is dropped before validation."""
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else None
        out = {}
        for k, v in value.items():
            sub = props.get(k, extra)
            if v is None and sub is not None and not sub.get("nullable", False):
                continue
            out[k] = prune_nulls(sub, v) if sub is not None else v
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune_nulls(schema["items"], v) for v in value]
    return value


RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def is_date_time(text):
    m = RFC3339.match(text)
    if not m:
        return False
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    return hour <= 23 and minute <= 59 and second <= 59  # no leap second: strfmt refuses one


def format_checker():
    checker = jsonschema.FormatChecker(formats=())

    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    checker.checks("int32")(lambda v: not is_int(v) or -(2**31) <= v < 2**31)
    checker.checks("int64")(lambda v: not is_int(v) or -(2**63) <= v < 2**63)
    checker.checks("date-time")(lambda v: not isinstance(v, str) or is_date_time(v))
    return checker


def render(schema, instance_path):
    """A jsonschema instance path in Kubernetes' spelling, walking the structural schema alongside."""
    out, node = "", schema
    for step in instance_path:
        if isinstance(step, int):
            out += f"[{step}]"
            node = node.get("items", {}) if isinstance(node, dict) else {}
        elif isinstance(node, dict) and step in node.get("properties", {}):
            out += ("." if out else "") + step
            node = node["properties"][step]
        elif isinstance(node, dict) and isinstance(node.get("additionalProperties"), dict):
            out += f"[{step}]"
            node = node["additionalProperties"]
        else:
            out += ("." if out else "") + step
            node = {}
    return out


def join(parent, key):
    return f"{parent}.{key}" if parent else key


def list_type_errors(schema, value, path, errors):
    """list-type: duplicates in x-kubernetes-list-type map / set lists."""
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else None
        for k, v in value.items():
            if k in props:
                list_type_errors(props[k], v, join(path, k), errors)
            elif extra is not None:
                list_type_errors(extra, v, f"{path}[{k}]", errors)
    elif isinstance(value, list):
        kind = schema.get("x-kubernetes-list-type")
        seen = set()
        for i, item in enumerate(value):
            if kind == "map" and isinstance(item, dict):
                key = json.dumps([item.get(k) for k in schema.get("x-kubernetes-list-map-keys", [])])
            elif kind == "set":
                key = json.dumps(item, sort_keys=True)
            else:
                key = None
            if key is not None and key in seen:
                errors.append({"path": f"{path}[{i}]", "kind": "duplicate"})
            seen.add(key)
            if isinstance(schema.get("items"), dict):
                list_type_errors(schema["items"], item, f"{path}[{i}]", errors)


def judge(crd, case, validators):
    doc = copy.deepcopy(case["document"])
    errors = []
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    served = {f"{group}/{v['name']}": v for v in crd["spec"]["versions"] if v.get("served")}
    if not isinstance(doc, dict):
        return {"accepted": False, "errors": [{"path": "", "kind": "invalid"}]}
    version = served.get(doc.get("apiVersion"))
    if version is None:
        errors.append({"path": "apiVersion", "kind": "routing"})
    if doc.get("kind") != kind:
        errors.append({"path": "kind", "kind": "routing"})
    if errors:
        return {"accepted": False, "errors": errors}
    schema = version["schema"]["openAPIV3Schema"]
    if "status" in version.get("subresources", {}) and case.get("subresource", "main") == "main":
        doc.pop("status", None)  # status-subresource
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = meta.get("name")  # object-meta (a generateName alone: the name is made by the apiserver, not judged)
    if name is None or name == "":
        if not meta.get("generateName"):
            errors.append({"path": "metadata.name", "kind": "required"})
    elif not isinstance(name, str) or len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        errors.append({"path": "metadata.name", "kind": "invalid"})
    doc = prune_nulls(schema, doc)
    validator = validators[(version["name"], case.get("mode", "strict"))]
    for e in validator.iter_errors(doc):
        where = render(schema, e.absolute_path)
        if e.validator == "required":
            missing = [p for p in e.validator_value if isinstance(e.instance, dict) and p not in e.instance]
            errors += [{"path": join(where, p), "kind": "required"} for p in missing]
        elif e.validator == "additionalProperties" and e.validator_value is False:
            known = e.schema.get("properties", {})
            errors += [{"path": join(where, k), "kind": "unknown"} for k in e.instance if k not in known]
        else:
            errors.append({"path": where, "kind": "invalid"})
    list_type_errors(schema, doc, "", errors)
    unique = {(x["path"], x["kind"]): x for x in errors}
    return {"accepted": not unique, "errors": list(unique.values())}


def main(argv):
    with open(argv[1]) as f:
        crd = yaml.safe_load(f)
    with open(argv[2]) as f:
        cases = json.load(f)
    validators = {}
    try:
        for v in crd["spec"]["versions"]:
            schema = v["schema"]["openAPIV3Schema"]
            check_handled(schema)
            for mode in ("strict", "ignore"):
                draft4 = to_draft4(schema, strict=(mode == "strict"))
                jsonschema.Draft4Validator.check_schema(draft4)
                validators[(v["name"], mode)] = jsonschema.Draft4Validator(draft4, format_checker=format_checker())
    except Unhandled as e:
        print(f"crd_oracle: cannot judge this CRD: {e}", file=sys.stderr)
        return 2
    json.dump([judge(crd, c, validators) for c in cases], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
