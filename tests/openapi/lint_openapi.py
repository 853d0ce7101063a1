#!/usr/bin/python3
"""lint_openapi.py - a strict linter of docs/openapi.yaml, without a server.

    tests/openapi/lint_openapi.py [FILE]      (from the repository root; make test runs it)

What `npx @redocly/cli lint` would refuse, with Debian's python3-yaml and
python3-jsonschema only (no Node here, and Debian 12 packages no OpenAPI
validator):
  - YAML: a key twice in one mapping (PyYAML keeps the last one silently);
  - every object is checked against the OpenAPI 3.1 field names of its kind (OpenAPI,
    Info, Server, Paths, Path Item, Operation, Parameter, Request Body, Media Type,
    Responses, Response, Header, Example, Components, Security Scheme, Tag, Reference)
    and a schema against the JSON Schema 2020-12 keywords and OpenAPI's own: an unknown
    field fails (x- extensions are allowed); so does a null where the field needs a
    value, which is what an unquoted `description: a, b` in a flow mapping leaves: a key
    "b" with no value;
  - the fields an object requires (info.title and version, a response's description, a
    parameter's name and in, a path parameter's required: true, ...), and the types of
    descriptions, summaries and the like (strings);
  - every $ref resolves within the document, to an object of the kind its place wants;
  - every {name} of a path is a path parameter of its operations, and back; operationIds
    are unique; every operation says its security (`security: []` when public, as
    redocly's security-defined wants) and every requirement names a security scheme;
    every tag an operation names is declared;
  - every schema is a valid JSON Schema 2020-12 (the metaschema).
Examples are validated against their schemas by check_openapi.py. It prints cmocka's
summary lines, which tests/run.sh counts.
"""
import os
import re
import sys

import yaml
from jsonschema import Draft202012Validator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from market_world import ROOT, Checks  # noqa: E402

CHECKS = Checks()
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

# ---- the OpenAPI 3.1 objects: their fields, and which are required ----

FIELDS = {
    "OpenAPI": {"openapi", "info", "jsonSchemaDialect", "servers", "paths", "webhooks", "components",
                "security", "tags", "externalDocs"},
    "Info": {"title", "summary", "description", "termsOfService", "contact", "license", "version"},
    "Contact": {"name", "url", "email"},
    "License": {"name", "identifier", "url"},
    "Server": {"url", "description", "variables"},
    "ServerVariable": {"enum", "default", "description"},
    "Components": {"schemas", "responses", "parameters", "examples", "requestBodies", "headers",
                   "securitySchemes", "links", "callbacks", "pathItems"},
    "PathItem": {"$ref", "summary", "description", "servers", "parameters"} | set(METHODS),
    "Operation": {"tags", "summary", "description", "externalDocs", "operationId", "parameters",
                  "requestBody", "responses", "callbacks", "deprecated", "security", "servers"},
    "ExternalDocs": {"description", "url"},
    "Parameter": {"name", "in", "description", "required", "deprecated", "allowEmptyValue", "style",
                  "explode", "allowReserved", "schema", "example", "examples", "content"},
    "RequestBody": {"description", "content", "required"},
    "MediaType": {"schema", "example", "examples", "encoding"},
    "Encoding": {"contentType", "headers", "style", "explode", "allowReserved"},
    "Response": {"description", "headers", "content", "links"},
    "Header": {"description", "required", "deprecated", "allowEmptyValue", "style", "explode",
               "allowReserved", "schema", "example", "examples", "content"},
    "Example": {"summary", "description", "value", "externalValue"},
    "Link": {"operationRef", "operationId", "parameters", "requestBody", "description", "server"},
    "Tag": {"name", "description", "externalDocs"},
    "SecurityScheme": {"type", "description", "name", "in", "scheme", "bearerFormat", "flows",
                       "openIdConnectUrl"},
    "Reference": {"$ref", "summary", "description"},
}
REQUIRED = {
    "OpenAPI": {"openapi", "info"},
    "Info": {"title", "version"},
    "License": {"name"},
    "Server": {"url"},
    "ServerVariable": {"default"},
    "Operation": {"responses"},
    "ExternalDocs": {"url"},
    "Parameter": {"name", "in"},
    "RequestBody": {"content"},
    "Response": {"description"},
    "Tag": {"name"},
    "SecurityScheme": {"type"},
}
STRINGS = {"title", "summary", "description", "version", "operationId", "name", "url", "bearerFormat",
           "scheme", "openapi", "termsOfService", "email", "identifier", "externalValue", "jsonSchemaDialect"}
BOOLEANS = {"required", "deprecated", "allowEmptyValue", "explode", "allowReserved"}
# Where a $ref of each kind may point.
REF_HOMES = {
    "Schema": "#/components/schemas/",
    "Parameter": "#/components/parameters/",
    "Response": "#/components/responses/",
    "RequestBody": "#/components/requestBodies/",
    "Header": "#/components/headers/",
    "Example": "#/components/examples/",
    "PathItem": "#/components/pathItems/",
    "Link": "#/components/links/",
    "SecurityScheme": "#/components/securitySchemes/",
}

# JSON Schema 2020-12 (core, applicator, unevaluated, validation, meta-data, format,
# content) and the Schema Object's own fields in OpenAPI 3.1.
SCHEMA_KEYWORDS = {
    "$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "$comment",
    "$defs", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "prefixItems",
    "items", "contains", "properties", "patternProperties", "additionalProperties", "propertyNames",
    "unevaluatedItems", "unevaluatedProperties", "type", "enum", "const", "multipleOf", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems",
    "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required",
    "dependentRequired", "title", "description", "default", "deprecated", "readOnly", "writeOnly",
    "examples", "format", "contentEncoding", "contentMediaType", "contentSchema",
    "discriminator", "xml", "externalDocs", "example",
}
SCHEMA_MAPS = {"properties", "patternProperties", "$defs", "dependentSchemas"}
SCHEMA_ONE = {"not", "if", "then", "else", "items", "contains", "additionalProperties", "propertyNames",
              "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
SCHEMA_LISTS = {"allOf", "anyOf", "oneOf", "prefixItems"}
SCHEMA_VALUES = {"default", "const", "enum", "examples", "example"}  # any JSON, null included
TYPES = {"null", "boolean", "object", "array", "number", "string", "integer"}


# ---- loading: a mapping that repeats a key is an error ----

class UniqueKeyLoader(yaml.SafeLoader):
    pass


def construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)


# ---- the walk ----

class Linter:
    def __init__(self, spec):
        self.spec, self.errors = spec, []

    def err(self, path, msg):
        self.errors.append(f"{'/'.join(str(p) for p in path) or '(root)'}: {msg}")

    def resolve(self, ref, path):
        if not isinstance(ref, str) or not ref.startswith("#/"):
            self.err(path, f"$ref {ref!r} is not a reference within the document")
            return None
        node = self.spec
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                self.err(path, f"$ref {ref} does not resolve")
                return None
        return node

    def fields(self, kind, obj, path):
        """Checks obj's fields against kind's; returns whether obj is a mapping."""
        if not isinstance(obj, dict):
            self.err(path, f"a {kind} must be a mapping, not {type(obj).__name__}")
            return False
        for k, v in obj.items():
            if not isinstance(k, str):
                self.err(path, f"key {k!r} is not a string")
                continue
            if k.startswith("x-"):
                continue
            if k not in FIELDS[kind]:
                self.err(path, f"unknown field {k!r} in a {kind}" + (" (with no value: text split off a "
                                                                     "description by a comma?)" if v is None else ""))
                continue
            if v is None and k not in ("example", "value", "default"):
                self.err(path + [k], "null: the field needs a value")
            elif k in STRINGS and not isinstance(v, str):
                self.err(path + [k], f"must be a string, not {type(v).__name__}")
            elif k in BOOLEANS and not isinstance(v, bool):
                self.err(path + [k], f"must be true or false, not {v!r}")
        for k in REQUIRED.get(kind, ()):
            if k not in obj:
                self.err(path, f"a {kind} needs {k!r}")
        return True

    def maybe_ref(self, kind, obj, path):
        """A Reference to a kind, or None when obj is not one (then it is the object itself)."""
        if not (isinstance(obj, dict) and "$ref" in obj) or kind == "Schema":
            return None
        self.fields("Reference", obj, path)
        home = REF_HOMES.get(kind)
        ref = obj["$ref"]
        if home and isinstance(ref, str) and not ref.startswith(home):
            self.err(path, f"$ref {ref} to a {kind} should point under {home}")
        return self.resolve(ref, path)

    def map_of(self, kind, obj, path, fn):
        if obj is None:
            self.err(path, "null: the field needs a value")
            return
        if not isinstance(obj, dict):
            self.err(path, f"must be a mapping of {kind}s")
            return
        for k, v in obj.items():
            fn(v, path + [k])

    def list_of(self, kind, obj, path, fn):
        if not isinstance(obj, list):
            self.err(path, f"must be a list of {kind}s")
            return
        for i, v in enumerate(obj):
            fn(v, path + [i])

    # -- objects --

    def openapi(self, o):
        path = []
        if not self.fields("OpenAPI", o, path):
            return
        if not str(o.get("openapi", "")).startswith("3.1."):
            self.err(["openapi"], "not 3.1.x")
        if self.fields("Info", o.get("info", {}), ["info"]):
            info = o.get("info", {})
            if "contact" in info:
                self.fields("Contact", info["contact"], ["info", "contact"])
            if "license" in info:
                self.fields("License", info["license"], ["info", "license"])
        if "servers" in o:
            self.list_of("Server", o["servers"], ["servers"], self.server)
        if "tags" in o:
            self.list_of("Tag", o["tags"], ["tags"], lambda t, p: self.fields("Tag", t, p))
        if "externalDocs" in o:
            self.fields("ExternalDocs", o["externalDocs"], ["externalDocs"])
        comps = o.get("components", {})
        if self.fields("Components", comps, ["components"]):
            self.map_of("Schema", comps.get("schemas", {}), ["components", "schemas"], self.schema)
            self.map_of("Response", comps.get("responses", {}), ["components", "responses"], self.response)
            self.map_of("Parameter", comps.get("parameters", {}), ["components", "parameters"], self.parameter)
            self.map_of("Example", comps.get("examples", {}), ["components", "examples"], self.example)
            self.map_of("RequestBody", comps.get("requestBodies", {}), ["components", "requestBodies"],
                        self.request_body)
            self.map_of("Header", comps.get("headers", {}), ["components", "headers"], self.header)
            self.map_of("SecurityScheme", comps.get("securitySchemes", {}), ["components", "securitySchemes"],
                        lambda s, p: self.fields("SecurityScheme", s, p))
        if "security" in o:
            self.security(o["security"], ["security"])
        self.map_of("PathItem", o.get("paths", {}), ["paths"], self.path_item)
        for name in o.get("paths", {}):
            if not isinstance(name, str) or not name.startswith("/"):
                self.err(["paths"], f"path {name!r} does not start with /")
        self.operation_ids()

    def server(self, s, path):
        if self.fields("Server", s, path) and "variables" in s:
            self.map_of("ServerVariable", s["variables"], path + ["variables"],
                        lambda v, p: self.fields("ServerVariable", v, p))

    def security(self, reqs, path):
        schemes = self.spec.get("components", {}).get("securitySchemes", {})
        if not isinstance(reqs, list):
            self.err(path, "must be a list of security requirements")
            return
        for i, req in enumerate(reqs):
            if not isinstance(req, dict):
                self.err(path + [i], "a security requirement is a mapping")
                continue
            for name, scopes in req.items():
                if name not in schemes:
                    self.err(path + [i], f"security scheme {name!r} is not in components/securitySchemes")
                if not isinstance(scopes, list):
                    self.err(path + [i, name], "scopes must be a list")

    def path_item(self, item, path):
        target = self.maybe_ref("PathItem", item, path)
        if target is not None or not self.fields("PathItem", item, path):
            return
        common = item.get("parameters", [])
        self.list_of("Parameter", common, path + ["parameters"], self.parameter)
        if "servers" in item:
            self.list_of("Server", item["servers"], path + ["servers"], self.server)
        template = set(re.findall(r"\{([^}/]+)\}", path[-1])) if isinstance(path[-1], str) else set()
        for m in METHODS:
            if m in item:
                self.operation(item[m], path + [m], common, template)

    def params_in_path(self, params):
        out = set()
        for p in params:
            if isinstance(p, dict) and "$ref" in p:
                p = self.resolve(p["$ref"], []) or {}
            if isinstance(p, dict) and p.get("in") == "path":
                out.add(p.get("name"))
        return out

    def operation(self, op, path, common, template):
        if not self.fields("Operation", op, path):
            return
        params = op.get("parameters", [])
        self.list_of("Parameter", params, path + ["parameters"], self.parameter)
        declared = self.params_in_path(list(common) + list(params))
        for name in template - declared:
            self.err(path, f"path parameter {{{name}}} is not declared")
        for name in declared - template:
            self.err(path, f"path parameter {name!r} is not in the path")
        if "requestBody" in op:
            self.request_body(op["requestBody"], path + ["requestBody"])
        responses = op.get("responses")
        if isinstance(responses, dict):
            if not responses:
                self.err(path + ["responses"], "no response")
            for code, resp in responses.items():
                if not re.fullmatch(r"default|[1-5](\d\d|XX)", str(code)):
                    self.err(path + ["responses"], f"{code!r} is not a status code")
                self.response(resp, path + ["responses", code])
        elif responses is not None:
            self.err(path + ["responses"], "must be a mapping")
        if "security" in op:
            self.security(op["security"], path + ["security"])
        elif "security" not in self.spec:
            self.err(path, "no security: say which token it needs, or `security: []` for a public one")
        if "servers" in op:
            self.list_of("Server", op["servers"], path + ["servers"], self.server)
        if "tags" in op:
            known = {t.get("name") for t in self.spec.get("tags", []) if isinstance(t, dict)}
            for t in op["tags"] if isinstance(op["tags"], list) else []:
                if t not in known:
                    self.err(path + ["tags"], f"tag {t!r} is not declared in tags")

    def operation_ids(self):
        seen = {}
        for p, item in (self.spec.get("paths") or {}).items():
            for m in METHODS:
                op = item.get(m) if isinstance(item, dict) else None
                oid = op.get("operationId") if isinstance(op, dict) else None
                if oid is None:
                    continue
                if oid in seen:
                    self.err(["paths", p, m], f"operationId {oid!r} also names {seen[oid]}")
                seen[oid] = f"{m.upper()} {p}"

    def parameter(self, p, path):
        if self.maybe_ref("Parameter", p, path) is not None or not self.fields("Parameter", p, path):
            return
        where = p.get("in")
        if where not in ("query", "header", "path", "cookie"):
            self.err(path, f"'in' is {where!r}: query, header, path or cookie")
        if where == "path" and p.get("required") is not True:
            self.err(path, "a path parameter must say required: true")
        if ("schema" in p) == ("content" in p):
            self.err(path, "a parameter has either a schema or a content")
        self.value_holder(p, path)

    def value_holder(self, o, path):
        """What a Parameter and a Header share: schema or content, and examples."""
        if "schema" in o:
            self.schema(o["schema"], path + ["schema"])
        if "content" in o:
            self.content(o["content"], path + ["content"])
        if "examples" in o:
            self.map_of("Example", o["examples"], path + ["examples"], self.example)
        if "example" in o and "examples" in o:
            self.err(path, "both example and examples")

    def header(self, h, path):
        if self.maybe_ref("Header", h, path) is not None or not self.fields("Header", h, path):
            return
        self.value_holder(h, path)

    def request_body(self, b, path):
        if self.maybe_ref("RequestBody", b, path) is not None or not self.fields("RequestBody", b, path):
            return
        self.content(b.get("content", {}), path + ["content"])

    def response(self, r, path):
        if self.maybe_ref("Response", r, path) is not None or not self.fields("Response", r, path):
            return
        if "headers" in r:
            self.map_of("Header", r["headers"], path + ["headers"], self.header)
        if "content" in r:
            self.content(r["content"], path + ["content"])

    def content(self, c, path):
        def media(m, p):
            if not self.fields("MediaType", m, p):
                return
            if "schema" in m:
                self.schema(m["schema"], p + ["schema"])
            if "examples" in m:
                self.map_of("Example", m["examples"], p + ["examples"], self.example)
            if "example" in m and "examples" in m:
                self.err(p, "both example and examples")
            if "encoding" in m:
                self.map_of("Encoding", m["encoding"], p + ["encoding"],
                            lambda e, q: self.fields("Encoding", e, q))
        self.map_of("MediaType", c, path, media)
        if isinstance(c, dict):
            for ctype in c:
                if not re.fullmatch(r"[\w.+*-]+/[\w.+*-]+(;.*)?", str(ctype)):
                    self.err(path, f"{ctype!r} is not a media type")

    def example(self, e, path):
        if self.maybe_ref("Example", e, path) is not None or not self.fields("Example", e, path):
            return
        if "value" in e and "externalValue" in e:
            self.err(path, "both value and externalValue")

    def schema(self, s, path):
        if isinstance(s, bool):
            return
        if not isinstance(s, dict):
            self.err(path, f"a schema must be a mapping or a boolean, not {type(s).__name__}")
            return
        for k, v in s.items():
            if not isinstance(k, str):
                self.err(path, f"key {k!r} is not a string")
                continue
            if k.startswith("x-"):
                continue
            if k not in SCHEMA_KEYWORDS:
                self.err(path, f"unknown schema keyword {k!r}" + (" (with no value: text split off a "
                                                                  "description by a comma?)" if v is None else ""))
                continue
            if v is None and k not in SCHEMA_VALUES:
                self.err(path + [k], "null: the keyword needs a value")
                continue
            if k in ("title", "description", "$comment", "format", "pattern") and not isinstance(v, str):
                self.err(path + [k], f"must be a string, not {type(v).__name__}")
            elif k == "type":
                types = v if isinstance(v, list) else [v]
                bad = [t for t in types if t not in TYPES]
                if bad:
                    self.err(path + [k], f"unknown type {bad}")
            elif k == "$ref":
                target = self.resolve(v, path + [k])
                if target is not None and not isinstance(target, (dict, bool)):
                    self.err(path + [k], f"$ref {v} is not a schema")
            elif k in SCHEMA_MAPS:
                self.map_of("Schema", v, path + [k], self.schema)
            elif k in SCHEMA_ONE:
                self.schema(v, path + [k])
            elif k in SCHEMA_LISTS:
                self.list_of("Schema", v, path + [k], self.schema)
            elif k == "required" and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
                self.err(path + [k], "must be a list of property names")
        if isinstance(s.get("required"), list) and isinstance(s.get("properties"), dict) and \
                s.get("additionalProperties") is False:
            for name in s["required"]:
                if name not in s["properties"]:
                    self.err(path + ["required"], f"{name!r} is required but not a property")


def lint(path):
    with open(path, encoding="utf-8") as f:
        spec = yaml.load(f, Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    linter = Linter(spec)
    linter.openapi(spec)
    return spec, linter.errors


def main(argv):
    path = argv[1] if len(argv) > 1 else os.path.join(ROOT, "docs", "openapi.yaml")
    box = {}

    def load():
        box["spec"], box["errors"] = lint(path)

    def clean():
        errors = box["errors"]
        for e in errors:
            print(f"  {e}")
        assert not errors, f"{len(errors)} problem(s)"

    def schemas():
        n = 0
        for name, schema in box["spec"]["components"]["schemas"].items():
            Draft202012Validator.check_schema(schema)
            n += 1
        print(f"  {n} schemas")

    CHECKS.run(f"{os.path.relpath(path, ROOT)} loads as YAML with no key repeated", load)
    if "spec" in box:
        CHECKS.run("every object has only the fields of its kind, with values, and every $ref resolves", clean)
        CHECKS.run("every schema is valid JSON Schema 2020-12", schemas)
    return CHECKS.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
