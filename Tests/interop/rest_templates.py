"""Templates through DocuSign's official Python SDK against a SignFleet coordinator
(docs/rest-api.md, "Templates"): TemplatesApi.create_template, list_templates, get,
update_document, and EnvelopesApi.create_envelope from a template with template roles. Run by
RESTTemplateTests; prints one JSON object. Every answer the SDK receives is checked
against DocuSign's published definition (openapi_check.py).
"""
import argparse
import base64
import json
import sys

from docusign_esign import (ApiClient, CarbonCopy, CompositeTemplate, Document, InlineTemplate, ServerTemplate, EnvelopeDefinition, EnvelopesApi, EnvelopeTemplate, Recipients,
                            SignHere, Signer, TemplateRole, TemplatesApi, Tabs, Text)
from docusign_esign.client.api_exception import ApiException

from openapi_check import AnswerChecker
from rest_sdk import error_of


def main():
    parser = argparse.ArgumentParser()
    for name in ["base-url", "token", "account", "pdf", "pdf2"]:
        parser.add_argument("--" + name, required=True)
    a = parser.parse_args()
    client = ApiClient(host=a.base_url + "/restapi")
    client.set_default_header("Authorization", "Bearer " + a.token)
    checker = AnswerChecker()
    checker.watch(client)
    templates, envelopes = TemplatesApi(client), EnvelopesApi(client)
    with open(a.pdf, "rb") as f:
        pdf = base64.b64encode(f.read()).decode()
    with open(a.pdf2, "rb") as f:
        pdf2 = base64.b64encode(f.read()).decode()
    out = {}

    summary = templates.create_template(a.account, envelope_template=EnvelopeTemplate(
        name="NDA template", email_subject="Please sign the NDA", email_blurb="From a template",
        documents=[Document(document_base64=pdf, name="NDA", file_extension="pdf", document_id="1")],
        recipients=Recipients(
            signers=[Signer(role_name="Client", recipient_id="1", routing_order="1", tabs=Tabs(
                sign_here_tabs=[SignHere(document_id="1", page_number="1", x_position="100", y_position="500")],
                text_tabs=[Text(tab_label="company", document_id="1", page_number="1", x_position="100", y_position="300",
                                width="200", height="20")]))],
            carbon_copies=[CarbonCopy(role_name="Legal", recipient_id="2", routing_order="2", name="Legal",
                                      email="legal@example.com")])))
    tid = summary.template_id
    out["created"] = {"templateId": tid, "name": summary.name, "uri": summary.uri}

    listed = templates.list_templates(a.account)
    out["list"] = {"totalSetSize": listed.total_set_size,
                   "names": [t.name for t in (listed.envelope_templates or [])],
                   "ids": [t.template_id for t in (listed.envelope_templates or [])]}
    got = templates.get(a.account, tid)
    signer = got.recipients.signers[0]
    out["template"] = {"name": got.name, "emailSubject": got.email_subject, "lastModified": got.last_modified,
                       "documents": [[d.document_id, d.name, d.pages] for d in got.documents],
                       "signer": [signer.role_name, signer.recipient_id, signer.routing_order],
                       "signerTabs": [t.tab_label for t in (signer.tabs.text_tabs or [])],
                       "carbonCopy": [c.role_name for c in (got.recipients.carbon_copies or [])]}

    created = envelopes.create_envelope(a.account, envelope_definition=EnvelopeDefinition(
        template_id=tid, status="sent", template_roles=[
            TemplateRole(role_name="Client", name="Dora Template", email="dora@example.com", client_user_id="cu-t",
                         tabs=Tabs(text_tabs=[Text(tab_label="company", value="Acme AG")]))]))
    envelope = envelopes.get_envelope(a.account, created.envelope_id, include="recipients")
    tabs = envelopes.list_tabs(a.account, created.envelope_id, "1")
    out["envelope"] = {"envelopeId": created.envelope_id, "status": envelope.status, "emailSubject": envelope.email_subject,
                       "signers": [[s.name, s.email, s.client_user_id] for s in (envelope.recipients.signers or [])],
                       "carbonCopies": [[c.name, c.email] for c in (envelope.recipients.carbon_copies or [])],
                       "company": [t.value for t in (tabs.text_tabs or [])]}

    # DocuSign's composite templates: the server template's roles filled by an inline template.
    composite = envelopes.create_envelope(a.account, envelope_definition=EnvelopeDefinition(status="sent", composite_templates=[
        CompositeTemplate(composite_template_id="1", server_templates=[ServerTemplate(sequence="1", template_id=tid)],
                          inline_templates=[InlineTemplate(sequence="2", recipients=Recipients(signers=[Signer(
                              role_name="Client", recipient_id="1", name="Cara Composite", email="cara@example.com",
                              client_user_id="cu-c", tabs=Tabs(text_tabs=[Text(tab_label="company", value="Composite AG")]))]))])]))
    composed = envelopes.get_envelope(a.account, composite.envelope_id, include="recipients")
    out["composite"] = {"signers": [[s.name, s.email, s.client_user_id] for s in (composed.recipients.signers or [])],
                        "company": [t.value for t in (envelopes.list_tabs(a.account, composite.envelope_id, "1").text_tabs or [])],
                        "emailSubject": composed.email_subject}
    # A composite template's document takes the place of the server template's; its tabs land on it.
    own = envelopes.create_envelope(a.account, envelope_definition=EnvelopeDefinition(status="sent", composite_templates=[
        CompositeTemplate(composite_template_id="1", server_templates=[ServerTemplate(sequence="1", template_id=tid)],
                          inline_templates=[InlineTemplate(sequence="2", recipients=Recipients(signers=[Signer(
                              role_name="Client", recipient_id="1", name="Otto Own", email="otto@example.com", client_user_id="cu-o")]))],
                          document=Document(document_base64=pdf2, name="Our own NDA", document_id="7", file_extension="pdf"))]))
    own_documents = envelopes.list_documents(a.account, own.envelope_id)
    own_tabs = envelopes.list_tabs(a.account, own.envelope_id, "1")
    out["compositeDocument"] = {
        "documents": [[d.document_id, d.name, str(len(d.pages or []))] for d in (own_documents.envelope_documents or []) if d.document_id != "certificate"],
        "signHere": [[t.document_id, t.page_number] for t in (own_tabs.sign_here_tabs or [])]}
    document = templates.update_document(a.account, "1", tid, envelope_definition=EnvelopeDefinition(
        documents=[Document(document_base64=pdf2, name="NDA v2", document_id="1")]))
    after = templates.get(a.account, tid)
    out["updated"] = {"document": [document.document_id, document.name, str(len(document.pages or []))],
                      "lastModified": after.last_modified, "documents": [[d.document_id, d.name, d.pages] for d in after.documents]}

    out["errors"] = {
        "unknownTemplate": error_of(lambda: envelopes.create_envelope(a.account, envelope_definition=EnvelopeDefinition(
            template_id="no-such-template", status="sent", template_roles=[TemplateRole(role_name="Client", name="X", email="x@example.com")]))),
        "unknownRole": error_of(lambda: envelopes.create_envelope(a.account, envelope_definition=EnvelopeDefinition(
            template_id=tid, status="sent", template_roles=[TemplateRole(role_name="Nobody", name="X", email="x@example.com")]))),
        "noRoleName": error_of(lambda: templates.create_template(a.account, envelope_template=EnvelopeTemplate(
            name="x", documents=[Document(document_base64=pdf, name="x", document_id="1")],
            recipients=Recipients(signers=[Signer(recipient_id="1", tabs=Tabs(sign_here_tabs=[
                SignHere(document_id="1", page_number="1", x_position="1", y_position="1")]))])))),
        "getUnknown": error_of(lambda: templates.get(a.account, "no-such-template")),
        "compositeInlineDocument": error_of(lambda: envelopes.create_envelope(a.account, envelope_definition=EnvelopeDefinition(
            status="sent", composite_templates=[CompositeTemplate(
                server_templates=[ServerTemplate(sequence="1", template_id=tid)],
                inline_templates=[InlineTemplate(sequence="2", documents=[Document(document_base64=pdf, name="extra", document_id="9")])])]))),
        "noDocument": error_of(lambda: templates.update_document(a.account, "9", tid, envelope_definition=EnvelopeDefinition(
            documents=[Document(document_base64=pdf, name="x", document_id="9")]))),
        "notAPDF": error_of(lambda: templates.update_document(a.account, "1", tid, envelope_definition=EnvelopeDefinition(
            documents=[Document(document_base64=base64.b64encode(b"not a pdf").decode(), name="x", document_id="1")]))),
    }
    out["schema"] = checker.summary()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    try:
        main()
    except ApiException as e:
        print(f"unexpected ApiException {e.status}: {e.body}", file=sys.stderr)
        sys.exit(1)
