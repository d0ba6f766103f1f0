#!/usr/bin/env python3
"""Drives a SignFleet coordinator's REST API (docs/rest-api.md) with DocuSign's official Python SDK,
docusign-esign 6.x from PyPI, unchanged: only its host is pointed at the coordinator.

    rest_sdk.py --base-url http://127.0.0.1:PORT --token TOKEN --account ACCOUNT \
        --envelope ENVELOPE_ID --client-user-id CU --user-name NAME --email EMAIL \
        --return-url URL --void-envelope ENVELOPE_ID --from-date ISO8601 --pdf PATH

Prints one JSON object with what the SDK's own classes read back (the Swift test checks it), and
exits 1 with the SDK's exception on the first unexpected failure.
"""
import argparse
import json
import os
import tempfile
import sys
import urllib.error
import urllib.request

import docusign_esign
import base64

from docusign_esign import (AccountsApi, ApiClient, CarbonCopy, InPersonSigner, DateSigned, Document, Envelope, EnvelopeDefinition, EnvelopesApi,
                            InitialHere, Recipients, RecipientViewRequest, SignHere, Signer, Tabs, Text)
from docusign_esign.client.api_exception import ApiException

from openapi_check import AnswerChecker


def error_of(call):
    """The status and DocuSign error body of a call that must fail (None when it succeeded)."""
    try:
        call()
    except ApiException as e:
        body = json.loads(e.body) if e.body else {}
        return {"status": e.status, "errorCode": body.get("errorCode"), "message": body.get("message")}
    return None


def raw_get(a, path, checker):
    """GET `path` under the account with no SDK in between, its answer checked as the server sent it."""
    url = f"{a.base_url}/restapi/v2.1/accounts/{a.account}{path}"
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + a.token})
    try:
        with urllib.request.urlopen(request) as response:
            checker.check("GET", url, response.status, response.read())
    except urllib.error.HTTPError as e:
        checker.check("GET", url, e.code, e.read())


def main():
    parser = argparse.ArgumentParser()
    for name in ["base-url", "token", "account", "envelope", "client-user-id", "user-name", "email", "return-url",
                 "void-envelope", "from-date", "pdf"]:
        parser.add_argument("--" + name, required=True)
    a = parser.parse_args()

    client = ApiClient(host=a.base_url + "/restapi")
    client.set_default_header("Authorization", "Bearer " + a.token)
    checker = AnswerChecker()
    checker.watch(client)
    envelopes = EnvelopesApi(client)
    out = {"sdkVersion": getattr(docusign_esign, "__version__", None)}
    account = AccountsApi(client).get_account_information(a.account)
    out["account"] = {"accountIdGuid": account.account_id_guid, "accountName": account.account_name}

    envelope = envelopes.get_envelope(a.account, a.envelope, include="recipients")
    out["envelope"] = {
        "envelopeId": envelope.envelope_id, "status": envelope.status, "emailSubject": envelope.email_subject,
        "createdDateTime": envelope.created_date_time, "statusChangedDateTime": envelope.status_changed_date_time,
        "recipientsUri": envelope.recipients_uri,
        "signers": [{"recipientId": s.recipient_id, "name": s.name, "email": s.email, "clientUserId": s.client_user_id,
                     "status": s.status, "routingOrder": s.routing_order} for s in (envelope.recipients.signers or [])],
    }

    documents = envelopes.list_documents(a.account, a.envelope)
    out["documents"] = [{"documentId": d.document_id, "name": d.name, "type": d.type, "uri": d.uri,
                         "pages": [(p.sequence, p.width, p.height) for p in (d.pages or [])]}
                        for d in (documents.envelope_documents or [])]

    recipients = envelopes.list_recipients(a.account, a.envelope)
    out["recipientCount"] = recipients.recipient_count

    # Documents as files (the SDK hands back the body's bytes): one document, the combined PDF
    # with its certificate and without, the certificate alone. The test reads them with poppler.
    downloads = {}
    for name, document_id, options in [("document", "doc1", {}), ("combined", "combined", {}),
                                       ("combinedBare", "combined", {"certificate": "false"}),
                                       ("certificate", "certificate", {})]:
        body = envelopes.get_document(a.account, document_id, a.envelope, **options)
        path = os.path.join(tempfile.mkdtemp(prefix="signfleet-sdk-"), name + ".pdf")
        with open(path, "wb") as f:
            f.write(body if isinstance(body, bytes) else body.encode("latin-1"))
        downloads[name] = path
    out["downloads"] = downloads

    changes = envelopes.list_status_changes(a.account, from_date=a.from_date)
    out["list"] = {"totalSetSize": changes.total_set_size, "resultSetSize": changes.result_set_size,
                   "ids": [e.envelope_id for e in (changes.envelopes or [])]}
    found = envelopes.list_status_changes(a.account, from_date=a.from_date, search_text=a.user_name.upper())
    out["search"] = [e.envelope_id for e in (found.envelopes or [])]
    byid = envelopes.list_status_changes(a.account, envelope_ids=a.envelope)
    out["listById"] = [e.envelope_id for e in (byid.envelopes or [])]

    view = envelopes.create_recipient_view(a.account, a.envelope, recipient_view_request=RecipientViewRequest(
        authentication_method="none", client_user_id=a.client_user_id, user_name=a.user_name, email=a.email,
        return_url=a.return_url))
    out["viewUrl"] = view.url

    envelopes.update(a.account, a.void_envelope, envelope=Envelope(status="voided", voided_reason="sent in error"))
    voided = envelopes.get_envelope(a.account, a.void_envelope)
    out["voided"] = {"status": voided.status, "voidedReason": voided.voided_reason, "voidedDateTime": voided.voided_date_time}

    # The embedded-signing flow of DocuSign's quick starts: an envelope with a base64 PDF, an
    # embedded signer with a sign-here and a text tab by position, a carbon copy; then its view.
    with open(a.pdf, "rb") as f:
        pdf = base64.b64encode(f.read()).decode("ascii")
    definition = EnvelopeDefinition(
        email_subject="Please sign this NDA", email_blurb="Sent over REST", status="sent",
        documents=[Document(document_base64=pdf, name="NDA", file_extension="pdf", document_id="1")],
        recipients=Recipients(
            signers=[Signer(email="dora@example.com", name="Dora Embedded", recipient_id="1", routing_order="1",
                            client_user_id="cu-rest", tabs=Tabs(
                                sign_here_tabs=[SignHere(document_id="1", page_number="2", x_position="100", y_position="150")],
                                text_tabs=[Text(document_id="1", page_number="1", x_position="100", y_position="300",
                                                tab_label="city", value="Bern", locked="true")]))],
            carbon_copies=[CarbonCopy(email="legal@example.com", name="Legal", recipient_id="2", routing_order="2")]))
    summary = envelopes.create_envelope(a.account, envelope_definition=definition)
    created = envelopes.get_envelope(a.account, summary.envelope_id, include="recipients")
    rest_view = envelopes.create_recipient_view(a.account, summary.envelope_id, recipient_view_request=RecipientViewRequest(
        authentication_method="none", client_user_id="cu-rest", user_name="Dora Embedded", email="dora@example.com",
        return_url=a.return_url))
    out["created"] = {
        "envelopeId": summary.envelope_id, "status": summary.status, "uri": summary.uri,
        "emailSubject": created.email_subject, "emailBlurb": created.email_blurb,
        "signers": [{"name": s.name, "clientUserId": s.client_user_id, "status": s.status} for s in created.recipients.signers or []],
        "carbonCopies": [{"name": c.name, "status": c.status} for c in created.recipients.carbon_copies or []],
        "viewUrl": rest_view.url,
    }
    # An in-person signer: a host hands the device to a walk-in signer; the view is asked for by the host.
    in_person = envelopes.create_envelope(a.account, envelope_definition=EnvelopeDefinition(
        email_subject="Signed in person", status="sent",
        documents=[Document(document_base64=pdf, name="NDA", file_extension="pdf", document_id="1")],
        recipients=Recipients(in_person_signers=[InPersonSigner(
            recipient_id="1", host_name="Hana Host", host_email="hana@example.com", signer_name="Walt Walkin",
            client_user_id="cu-host", tabs=Tabs(sign_here_tabs=[SignHere(document_id="1", page_number="1", x_position="100",
                                                                         y_position="500")]))])))
    in_person_view = envelopes.create_recipient_view(a.account, in_person.envelope_id, recipient_view_request=RecipientViewRequest(
        authentication_method="none", client_user_id="cu-host", user_name="Hana Host", email="hana@example.com",
        return_url=a.return_url))
    host = envelopes.list_recipients(a.account, in_person.envelope_id).in_person_signers[0]
    out["inPerson"] = {"envelopeId": in_person.envelope_id, "viewUrl": in_person_view.url,
                       "recipient": [host.host_name, host.host_email, host.signer_name, host.recipient_type, host.status]}
    # Anchor tabs: a sign-here 10 px right of and 5 px above every "page" (case-insensitive, one per
    # page of the sample PDF), an initial-here half an inch right of the right edge of "NDA" (whole
    # word), a date-signed at an anchor the document lacks, left out as asked; read back with tabs.
    anchored_ok = EnvelopeDefinition(
        email_subject="Anchored", status="sent",
        documents=[Document(document_base64=pdf, name="NDA", file_extension="pdf", document_id="1")],
        recipients=Recipients(signers=[Signer(
            email="ann@example.com", name="Ann Anchor", recipient_id="1", client_user_id="cu-anchor", tabs=Tabs(
                sign_here_tabs=[SignHere(anchor_string="page", anchor_x_offset="10", anchor_y_offset="-5", anchor_units="pixels")],
                initial_here_tabs=[InitialHere(anchor_string="NDA", anchor_match_whole_word="true", anchor_units="inches",
                                               anchor_x_offset="0.5", anchor_horizontal_alignment="right")],
                date_signed_tabs=[DateSigned(anchor_string="Witness:", anchor_ignore_if_not_present="true")]))]))
    anchored_id = envelopes.create_envelope(a.account, envelope_definition=anchored_ok).envelope_id
    listed = envelopes.list_recipients(a.account, anchored_id, include_tabs="true")
    tabs = listed.signers[0].tabs
    out["anchored"] = {
        "signHere": [[t.document_id, t.page_number, t.x_position, t.y_position] for t in (tabs.sign_here_tabs or [])],
        "initialHere": [[t.document_id, t.page_number, t.x_position, t.y_position] for t in (tabs.initial_here_tabs or [])],
        "dateSigned": len(tabs.date_signed_tabs or []),
    }
    # One recipient's tabs (list_tabs): the same placed tabs; the REST envelope's text tab with its
    # value; a carbon copy has none.
    one = envelopes.list_tabs(a.account, anchored_id, "1")
    out["anchored"]["listTabs"] = [[t.document_id, t.page_number, t.x_position, t.y_position] for t in (one.sign_here_tabs or [])]
    texts = envelopes.list_tabs(a.account, summary.envelope_id, "1").text_tabs or []
    out["listTabs"] = {
        "text": [[t.tab_label, t.value, t.locked, t.page_number, t.x_position, t.y_position] for t in texts],
        "carbonCopy": [name for name, value in envelopes.list_tabs(a.account, summary.envelope_id, "2").to_dict().items() if value],
    }
    # Custom fields (list_custom_fields): a REST envelope has none, both lists there and empty.
    fields = envelopes.list_custom_fields(a.account, summary.envelope_id)
    out["customFields"] = {"text": len(fields.text_custom_fields or []), "list": len(fields.list_custom_fields or []),
                           "keys": sorted(k for k, v in fields.to_dict().items() if v is not None)}
    # A draft, sent later (DocuSign's default status at creation is "created").
    definition.status = "created"
    draft = envelopes.create_envelope(a.account, envelope_definition=definition)
    draft_before = envelopes.get_envelope(a.account, draft.envelope_id).status
    out["listTabs"]["draftSignHere"] = [[t.page_number, t.x_position, t.y_position]
                                        for t in (envelopes.list_tabs(a.account, draft.envelope_id, "1").sign_here_tabs or [])]
    # Edited before sending: the signer's name and email, the text tab's value (found by its label).
    updated = envelopes.update_recipients(a.account, draft.envelope_id, recipients=Recipients(
        signers=[Signer(recipient_id="1", name="Dora Edited", email="dora.edited@example.com")]))
    retabbed = envelopes.update_tabs(a.account, draft.envelope_id, "1", tabs=Tabs(text_tabs=[Text(tab_label="city", value="Basel")]))
    edits = {"updated": [r.recipient_id for r in (updated.recipient_update_results or [])],
             "city": [t.value for t in (retabbed.text_tabs or [])]}
    envelopes.update(a.account, draft.envelope_id, envelope=Envelope(status="sent"))
    sent_signer = envelopes.list_recipients(a.account, draft.envelope_id).signers[0]
    edits["sentSigner"] = [sent_signer.name, sent_signer.email]
    edits["sentCity"] = [t.value for t in (envelopes.list_tabs(a.account, draft.envelope_id, "1").text_tabs or [])]
    edits["afterSent"] = error_of(lambda: envelopes.update_recipients(a.account, draft.envelope_id, recipients=Recipients(
        signers=[Signer(recipient_id="1", name="Too Late")])))
    edits["unknownRecipient"] = error_of(lambda: envelopes.update_tabs(a.account, "no-such-envelope", "1", tabs=Tabs()))
    out["edits"] = edits
    out["draft"] = {"created": draft.status, "before": draft_before,
                    "after": envelopes.get_envelope(a.account, draft.envelope_id).status}
    bad_pdf = EnvelopeDefinition(email_subject="x", status="sent", documents=[Document(
        document_base64=base64.b64encode(b"not a pdf").decode("ascii"), name="x", file_extension="pdf", document_id="1")],
        recipients=Recipients(signers=[Signer(email="a@example.com", name="A", recipient_id="1", tabs=Tabs(
            sign_here_tabs=[SignHere(document_id="1", page_number="1", x_position="1", y_position="1")]))]))
    anchored = EnvelopeDefinition(email_subject="x", status="sent", documents=[Document(
        document_base64=pdf, name="x", file_extension="pdf", document_id="1")],
        recipients=Recipients(signers=[Signer(email="a@example.com", name="A", recipient_id="1", tabs=Tabs(
            sign_here_tabs=[SignHere(anchor_string="/sn1/")]))]))
    page_out = EnvelopeDefinition(email_subject="x", status="sent", documents=[Document(
        document_base64=pdf, name="x", file_extension="pdf", document_id="1")],
        recipients=Recipients(signers=[Signer(email="a@example.com", name="A", recipient_id="1", tabs=Tabs(
            sign_here_tabs=[SignHere(document_id="1", page_number="9", x_position="1", y_position="1")]))]))

    out["errors"] = {
        "notAPDF": error_of(lambda: envelopes.create_envelope(a.account, envelope_definition=bad_pdf)),
        "anchorTab": error_of(lambda: envelopes.create_envelope(a.account, envelope_definition=anchored)),
        "pageOutOfRange": error_of(lambda: envelopes.create_envelope(a.account, envelope_definition=page_out)),
        "noDocuments": error_of(lambda: envelopes.create_envelope(
            a.account, envelope_definition=EnvelopeDefinition(email_subject="x", status="sent"))),
        "unknownEnvelope": error_of(lambda: envelopes.get_envelope(a.account, "no-such-envelope")),
        "otherAccount": error_of(lambda: envelopes.get_envelope("some-other-account", a.envelope)),
        "unknownRecipient": error_of(lambda: envelopes.create_recipient_view(
            a.account, a.envelope, recipient_view_request=RecipientViewRequest(
                authentication_method="none", client_user_id="nobody", user_name="No One", email="no@one.example",
                return_url=a.return_url))),
        "noFromDate": error_of(lambda: envelopes.list_status_changes(a.account)),
        "tabsOfNoOne": error_of(lambda: envelopes.list_tabs(a.account, a.envelope, "99")),
        "noDocument": error_of(lambda: envelopes.get_document(a.account, "no-such-document", a.envelope)),
    }
    # Answers the SDK did not ask for in these forms, checked raw too.
    for path in [f"/envelopes/{a.envelope}?include=recipients", f"/envelopes/{draft.envelope_id}?include=recipients",
                 f"/envelopes/{anchored_id}/recipients?include_tabs=true", "/envelopes/no-such-envelope"]:
        raw_get(a, path, checker)

    bad = ApiClient(host=a.base_url + "/restapi")
    bad.set_default_header("Authorization", "Bearer not-a-token")
    checker.watch(bad)
    out["errors"]["badToken"] = error_of(lambda: EnvelopesApi(bad).get_envelope(a.account, a.envelope))
    out["schema"] = checker.summary()

    json.dump(out, sys.stdout)


if __name__ == "__main__":
    try:
        main()
    except ApiException as e:
        print(f"unexpected ApiException {e.status}: {e.body}", file=sys.stderr)
        sys.exit(1)
