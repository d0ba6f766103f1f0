#!/usr/bin/env python3
"""Cuts DocuSign's published eSignature REST definition down to what SignFleet's interop tests check
answers against: the operations docs/rest-api.md implements, their answers' schemas, and every
definition those reach, with descriptions, examples and DocuSign's x-ds-* notes left out.

    extract.py esignature.rest.swagger-v2.1.json > esignature-v2.1-subset.json

The input is docusign/eSign-OpenAPI-Specification's file (MIT, see LICENSE beside this script);
the output keeps its `info`, the source's commit given by --source, and nothing of our own.
"""
import argparse
import json
import sys

# (method, path) as the definition spells them: the operations SignFleet serves (docs/rest-api.md).
OPERATIONS = [
    ("get", "/v2.1/accounts/{accountId}"),
    ("get", "/v2.1/accounts/{accountId}/envelopes"),
    ("post", "/v2.1/accounts/{accountId}/envelopes"),
    ("get", "/v2.1/accounts/{accountId}/envelopes/{envelopeId}"),
    ("put", "/v2.1/accounts/{accountId}/envelopes/{envelopeId}"),
    ("get", "/v2.1/accounts/{accountId}/envelopes/{envelopeId}/recipients"),
    ("put", "/v2.1/accounts/{accountId}/envelopes/{envelopeId}/recipients"),
    ("get", "/v2.1/accounts/{accountId}/envelopes/{envelopeId}/recipients/{recipientId}/tabs"),
    ("put", "/v2.1/accounts/{accountId}/envelopes/{envelopeId}/recipients/{recipientId}/tabs"),
    ("get", "/v2.1/accounts/{accountId}/envelopes/{envelopeId}/custom_fields"),
    ("get", "/v2.1/accounts/{accountId}/envelopes/{envelopeId}/documents"),
    ("get", "/v2.1/accounts/{accountId}/envelopes/{envelopeId}/documents/{documentId}"),
    ("post", "/v2.1/accounts/{accountId}/envelopes/{envelopeId}/views/recipient"),
    ("get", "/v2.1/accounts/{accountId}/templates"),
    ("post", "/v2.1/accounts/{accountId}/templates"),
    ("get", "/v2.1/accounts/{accountId}/templates/{templateId}"),
    ("put", "/v2.1/accounts/{accountId}/templates/{templateId}/documents/{documentId}"),
]
# Properties DocuSign's later v2.1 definitions declare that the 21.1.00 file does not: the official
# SDK that the tests use (docusign-esign 6.1.0, generated from a later definition) declares them in
# these models, and DocuSign's service sends them. Kept short and named so the gap stays visible.
LATER = {
    "envelopesInformation": {"nextUri": {"type": "string"}, "previousUri": {"type": "string"}},
}
KEPT = ("type", "format", "items", "$ref", "properties", "additionalProperties", "enum")


def reduced(schema):
    """A schema with only what validation reads."""
    out = {}
    for key in KEPT:
        if key not in schema:
            continue
        value = schema[key]
        if key == "items" or key == "additionalProperties" and isinstance(value, dict):
            value = reduced(value)
        elif key == "properties":
            value = {name: reduced(item) for name, item in value.items()}
        out[key] = value
    return out


def refs(schema):
    if isinstance(schema, dict):
        if "$ref" in schema:
            yield schema["$ref"].split("/")[-1]
        for value in schema.values():
            yield from refs(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from refs(value)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("definition")
    parser.add_argument("--source", default="")
    a = parser.parse_args()
    spec = json.load(open(a.definition))
    paths, wanted = {}, []
    for method, path in OPERATIONS:
        operation = spec["paths"][path][method]
        answers = {status: reduced(answer.get("schema", {})) for status, answer in operation["responses"].items()}
        paths.setdefault(path, {})[method] = {"operationId": operation["operationId"], "responses": answers}
        wanted += refs(answers)
    definitions = {}
    while wanted:
        name = wanted.pop()
        if name in definitions:
            continue
        if name not in spec["definitions"]:
            # The published file refers to a few definitions it does not define (offlineAttributes):
            # kept as an object of any shape, and named, so the gap is visible.
            definitions[name] = {"type": "object", "x-undefined-in-source": True}
            continue
        definitions[name] = reduced(spec["definitions"][name])
        if name in LATER:
            definitions[name]["properties"].update(LATER[name])
            definitions[name]["x-properties-from-sdk-6.1.0"] = sorted(LATER[name])
        wanted += refs(definitions[name])
    json.dump({"swagger": spec["swagger"], "info": {"title": spec["info"]["title"], "version": spec["info"]["version"]},
               "x-source": a.source, "basePath": spec["basePath"], "paths": paths,
               "definitions": dict(sorted(definitions.items()))}, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
