"""The OAuth JWT grant as DocuSign's official Python SDK does it, against a SignFleet coordinator's
HTTPS listener (docs/rest-api.md, "Authentication" and "TLS"), nothing patched but the OAuth host
and the CA the SDK trusts. Run by RESTOAuthTests; prints one JSON object.

The SDK's own calls: ApiClient.request_jwt_user_token (an RS256 assertion POSTed to
https://<oauth host>/oauth/token), get_user_info, then EnvelopesApi with the base_uri user info
names. Then hostile assertions, each POSTed as the SDK would, and the answers' bodies.
"""
import argparse
import json
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import base64
import hashlib
import hmac

from cryptography.hazmat.primitives import serialization

import jwt
from docusign_esign import ApiClient, Configuration, EnvelopesApi
from docusign_esign.client.api_exception import ApiException


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def post_assertion(a, assertion, grant_type="urn:ietf:params:oauth:grant-type:jwt-bearer"):
    """POST /oauth/token as the SDK does; the status and the JSON body."""
    context = ssl.create_default_context(cafile=a.ca)
    body = urllib.parse.urlencode({"assertion": assertion, "grant_type": grant_type}).encode()
    request = urllib.request.Request("https://" + a.oauth_host + "/oauth/token", data=body, method="POST",
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as r:
            return {"status": r.status, "body": json.loads(r.read())}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": json.loads(e.read() or b"{}")}


def main():
    parser = argparse.ArgumentParser()
    for name in ["oauth-host", "ca", "integration-key", "user-id", "private-key", "other-private-key",
                 "unconsented-user-id", "account", "other-account-user-id", "plain-host"]:
        parser.add_argument("--" + name, required=True)
    a = parser.parse_args()
    with open(a.private_key, "rb") as f:
        private_key = f.read()
    with open(a.other_private_key, "rb") as f:
        other_key = f.read()
    out = {}

    # The SDK's default configuration is shared by every ApiClient: its CA is the coordinator's.
    Configuration().ssl_ca_cert = a.ca
    client = ApiClient(oauth_host_name=a.oauth_host)
    token = client.request_jwt_user_token(
        client_id=a.integration_key, user_id=a.user_id, oauth_host_name=a.oauth_host,
        private_key_bytes=private_key, expires_in=3600, scopes=["signature", "impersonation"])
    out["token"] = {"tokenType": token.token_type, "expiresIn": token.expires_in, "scope": token.scope,
                    "hasAccessToken": bool(token.access_token)}
    info = client.get_user_info(token.access_token)
    account = info.get_accounts()[0]
    out["userInfo"] = {"sub": info.sub, "email": info.email, "accountId": account.account_id,
                       "baseUri": account.base_uri}
    client.host = account.base_uri + "/restapi"
    envelopes = EnvelopesApi(client)
    changes = envelopes.list_status_changes(a.account, from_date="2020-01-01")
    out["list"] = {"totalSetSize": changes.total_set_size}

    now = int(time.time())
    claims = {"iss": a.integration_key, "sub": a.user_id, "aud": a.oauth_host, "iat": now, "exp": now + 3600,
              "scope": "signature impersonation"}
    failures = {}
    try:
        client.request_jwt_user_token(
            client_id=a.integration_key, user_id=a.unconsented_user_id, oauth_host_name=a.oauth_host,
            private_key_bytes=private_key, expires_in=3600)
        failures["consent"] = {"status": 200}
    except ApiException as e:
        failures["consent"] = {"status": e.status, "body": json.loads(e.body or "{}")}
    failures["wrongKey"] = post_assertion(a, jwt.encode(claims, other_key, algorithm="RS256"))
    failures["algNone"] = post_assertion(
        a, b64(json.dumps({"alg": "none", "typ": "JWT"}).encode()) + "." + b64(json.dumps(claims).encode()) + ".")
    failures["hs256"] = post_assertion(a, jwt.encode(claims, "a shared secret", algorithm="HS256"))
    failures["wrongAudience"] = post_assertion(
        a, jwt.encode(dict(claims, aud="account-d.docusign.com"), private_key, algorithm="RS256"))
    failures["expired"] = post_assertion(
        a, jwt.encode(dict(claims, iat=now - 7200, exp=now - 3600), private_key, algorithm="RS256"))
    failures["tooLong"] = post_assertion(
        a, jwt.encode(dict(claims, exp=now + 7200), private_key, algorithm="RS256"))
    failures["unknownIssuer"] = post_assertion(
        a, jwt.encode(dict(claims, iss="00000000-0000-0000-0000-000000000000"), private_key, algorithm="RS256"))
    failures["otherUser"] = post_assertion(
        a, jwt.encode(dict(claims, sub="no-such-user"), private_key, algorithm="RS256"))
    failures["noSignatureScope"] = post_assertion(
        a, jwt.encode(dict(claims, scope="impersonation"), private_key, algorithm="RS256"))
    failures["garbage"] = post_assertion(a, "not.a.jwt")
    failures["otherAccountUser"] = post_assertion(
        a, jwt.encode(dict(claims, sub=a.other_account_user_id), private_key, algorithm="RS256"))
    failures["plainAudience"] = post_assertion(
        a, jwt.encode(dict(claims, aud=a.plain_host), private_key, algorithm="RS256"))
    # Algorithm confusion: an HMAC keyed with the integration key's public key (PEM), as a verifier
    # that trusted the header's alg would check it; and an RS256 signature under a header naming RS512.
    public_pem = serialization.load_pem_private_key(private_key, None).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    signing_input = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + b64(json.dumps(claims).encode())
    failures["hs256WithThePublicKey"] = post_assertion(
        a, signing_input + "." + b64(hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()))
    failures["lyingHeader"] = post_assertion(a, jwt.encode(claims, private_key, algorithm="RS256", headers={"alg": "RS512"}))
    context = ssl.create_default_context(cafile=a.ca)
    request = urllib.request.Request("https://" + a.oauth_host + "/oauth/token", method="POST",
                                     data=json.dumps({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                                      "assertion": jwt.encode(claims, private_key, algorithm="RS256")}).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(request, context=context, timeout=30)
        failures["json"] = {"status": 200}
    except urllib.error.HTTPError as e:
        failures["json"] = {"status": e.code, "body": json.loads(e.read() or b"{}")}
    failures["grantType"] = post_assertion(a, jwt.encode(claims, private_key, algorithm="RS256"), grant_type="password")
    out["failures"] = failures
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    try:
        main()
    except ApiException as e:
        print(f"unexpected ApiException {e.status}: {e.body}", file=sys.stderr)
        sys.exit(1)
