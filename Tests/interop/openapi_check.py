"""Checks a SignFleet coordinator's REST answers against DocuSign's published eSignature REST v2.1
definition (the subset in openapi/, cut by openapi/extract.py): the operation is found by method
and path, the answer's schema by its status (DocuSign defines every error answer as `errorDetails`
under 400), and the JSON body is walked against it. A key the definition does not declare, a value
of another JSON type (DocuSign's numbers and booleans are strings) or a status the operation does
not define is a problem; so is an answer to an operation outside the subset.

    checker = AnswerChecker()
    checker.watch(api_client)        # every answer the official SDK receives through this client
    checker.check("GET", url, status, body_bytes)
    checker.summary()                # {"checked", "operations", "problems"}
"""
import json
import os
import re
import urllib.parse

from docusign_esign.client.api_exception import ApiException

SUBSET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openapi", "esignature-v2.1-subset.json")
JSON_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
              "array": (list,), "object": (dict,)}


class AnswerChecker:
    def __init__(self, subset=SUBSET):
        with open(subset) as f:
            self.spec = json.load(f)
        self.definitions = self.spec["definitions"]
        self.routes = [(re.compile("^" + re.sub(r"\{[^}/]+\}", "[^/]+", path) + "$"), path, operations)
                       for path, operations in self.spec["paths"].items()]
        self.checked, self.operations, self.problems = 0, set(), []

    def watch(self, api_client):
        """Checks every answer `api_client` (the SDK's ApiClient) receives from now on."""
        inner = api_client.request

        def request(method, url, *args, **kwargs):
            try:
                response = inner(method, url, *args, **kwargs)
            except ApiException as e:
                self.check(method, url, e.status, e.body)
                raise
            self.check(method, url, response.status, response.data)
            return response
        api_client.request = request

    def check(self, method, url, status, body):
        path = urllib.parse.urlsplit(url).path
        base = self.spec["basePath"]
        if not path.startswith(base + "/"):
            return  # OAuth endpoints (/oauth/...) are not part of the eSignature definition
        path = path[len(base):]
        self.checked += 1
        where = f"{method} {path} {status}"
        operation = next((ops.get(method.lower()) for pattern, _, ops in self.routes if pattern.match(path)), None)
        if operation is None:
            self.problems.append(f"{where}: no such operation in the definition subset")
            return
        self.operations.add(operation["operationId"])
        answers = operation["responses"]
        key = str(status) if status < 400 else "400"
        if key not in answers:
            self.problems.append(f"{where}: the definition gives {operation['operationId']} answers {sorted(answers)}")
            return
        schema = answers[key]
        if schema.get("type") == "file" or not schema:
            return
        try:
            value = json.loads(body)
        except (TypeError, ValueError) as e:
            self.problems.append(f"{where}: the body is not JSON ({e})")
            return
        self.problems += [f"{where}: {p}" for p in self.value_problems(schema, value, "$")]

    def value_problems(self, schema, value, at):
        if "$ref" in schema:
            name = schema["$ref"].split("/")[-1]
            return self.value_problems(self.definitions[name], value, at + f"<{name}>")
        kind = schema.get("type", "object" if "properties" in schema else None)
        if kind is None:
            return []
        allowed = JSON_TYPES[kind]
        if not isinstance(value, allowed) or (kind in ("integer", "number") and isinstance(value, bool)):
            return [f"{at}: {type(value).__name__} where the definition has {kind}"]
        if kind == "array":
            return [p for i, item in enumerate(value) for p in self.value_problems(schema.get("items", {}), item, f"{at}[{i}]")]
        if kind != "object":
            return []
        properties, extra = schema.get("properties"), schema.get("additionalProperties")
        problems = []
        for key, item in value.items():
            if properties is not None and key in properties:
                problems += self.value_problems(properties[key], item, f"{at}.{key}")
            elif isinstance(extra, dict):
                problems += self.value_problems(extra, item, f"{at}.{key}")
            elif properties is not None:
                problems.append(f"{at}.{key}: not a property of the definition")
        return problems

    def summary(self):
        return {"checked": self.checked, "operations": sorted(self.operations), "problems": self.problems}
