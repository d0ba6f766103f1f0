#!/usr/bin/env python3
"""A Connect listener written from docs/webhooks.md alone, with the official SDK for the configuration.

    connect_listener.py --host http://127.0.0.1:PORT/restapi --token=TOKEN --account ACCOUNT --secret=S [--secret=S2]
                        [--fail-first N] [--fail-while FILE]

It listens on 127.0.0.1 (a port of its own), creates a Connect configuration pointing at itself
through docusign-esign's ConnectApi (unchanged), reads it back (list and get), then prints one
line per message it receives, as JSON:

    {"event": ..., "envelopeId": ..., "recipientId": ..., "retryCount": ..., "hmac": "valid"|"invalid"|"absent", "status": 200|500}

It answers 500 to its first N messages (default 1), and to every message while the file
--fail-while names exists; otherwise 200. Lines before the messages:
`listening URL` and `configured CONNECT_ID`. It stops on SIGTERM or SIGINT.
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import docusign_esign
from docusign_esign.apis.connect_api import ConnectApi
from docusign_esign.models.connect_custom_configuration import ConnectCustomConfiguration
from docusign_esign.models.connect_event_data import ConnectEventData


def verdict(body, headers, secrets):
    """The documented check: any X-DocuSign-Signature-N equal to base64 HMAC-SHA256(secret, body)."""
    given = [v for k, v in headers.items() if k.lower().startswith("x-docusign-signature-")]
    if not given:
        return "absent"
    for secret in secrets:
        expected = base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()
        if any(hmac.compare_digest(expected, value) for value in given):
            return "valid"
    return "invalid"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--account", required=True)
    parser.add_argument("--secret", action="append", default=[])
    parser.add_argument("--fail-first", type=int, default=1)
    parser.add_argument("--fail-while", help="answer 500 while this file exists")
    options = parser.parse_args()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})  # for sigwait, in every thread
    lock = threading.Lock()
    state = {"seen": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            with lock:
                state["seen"] += 1
                status = 500 if state["seen"] <= options.fail_first else 200
                if options.fail_while and os.path.exists(options.fail_while):
                    status = 500
            message = json.loads(body)
            data = message.get("data", {})
            line = {
                "event": message.get("event"),
                "envelopeId": data.get("envelopeId"),
                "recipientId": data.get("recipientId"),
                "retryCount": message.get("retryCount"),
                "status": status,
                "hmac": verdict(body, dict(self.headers.items()), options.secret),
                "envelopeStatus": data.get("envelopeSummary", {}).get("status"),
            }
            with lock:
                print(json.dumps(line, sort_keys=True), flush=True)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    url = "http://127.0.0.1:%d/docusign/connect" % server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("listening " + url, flush=True)

    client = docusign_esign.ApiClient(host=options.host)
    client.set_default_header("Authorization", "Bearer " + options.token)
    api = ConnectApi(client)
    created = api.create_configuration(
        options.account,
        connect_custom_configuration=ConnectCustomConfiguration(
            name="python listener", url_to_publish_to=url, allow_envelope_publish="true", all_users="true",
            include_hmac="true", delivery_mode="SIM", configuration_type="custom",
            events=["envelope-sent", "envelope-delivered", "envelope-completed", "envelope-declined", "envelope-voided",
                    "recipient-sent", "recipient-delivered", "recipient-completed", "recipient-declined"],
            event_data=ConnectEventData(format="json", version="restv2.1", include_data=["recipients"])))
    listed = api.list_configurations(options.account)
    assert any(c.connect_id == created.connect_id for c in listed.configurations), listed
    one = api.get_configuration(options.account, created.connect_id)
    assert one.configurations[0].url_to_publish_to == url, one
    assert one.configurations[0].include_hmac == "true", one
    print("configured " + created.connect_id, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    server.shutdown()


if __name__ == "__main__":
    main()
