"""The OAuth authorization code grant as DocuSign's official Python SDK does it, against a
SignFleet coordinator's HTTPS listener (docs/rest-api.md, "The authorization code grant"), nothing
patched but the OAuth host and the CA the SDK trusts. Run by RESTOAuthTests; prints one JSON object.

The SDK's own calls: ApiClient.get_authorization_uri (the consent page's link), then — the user's
part, done here with urllib as a browser without script would — the consent page read, its form
posted with the user's email and password and Allow, the redirect read (not followed); then
ApiClient.generate_access_token (HTTP Basic client_id:client_secret and the code), get_user_info
and EnvelopesApi with the base_uri user info names. Then the same code again, another code with a
wrong secret, a wrong password and Deny, and their answers.
"""
import argparse
import html.parser
import json
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request

from docusign_esign import ApiClient, Configuration, EnvelopesApi
from docusign_esign.client.api_exception import ApiException


class FormReader(html.parser.HTMLParser):
    """The consent page's form: its action and every input's name and value."""

    def __init__(self):
        super().__init__()
        self.action, self.fields, self.client_name, self._in_name = None, {}, "", False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.action = attrs.get("action")
        elif tag == "input" and attrs.get("type") == "hidden":
            self.fields[attrs["name"]] = attrs.get("value", "")
        elif tag == "span" and attrs.get("id") == "client-name":
            self._in_name = True

    def handle_endtag(self, tag):
        self._in_name = self._in_name and tag != "span"

    def handle_data(self, data):
        if self._in_name:
            self.client_name += data


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def fetch(a, url, form=None):
    """GET (or POST `form`) with redirects read, not followed: (status, headers, body)."""
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=a.ca)), NoRedirects)
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if form is not None else "GET")
    try:
        with opener.open(request, timeout=30) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), (e.read() or b"").decode()


def consent(a, uri, decision, password):
    """Reads the consent page at `uri` and answers it; (page, status, Location of the answer)."""
    status, headers, body = fetch(a, uri)
    if status != 200:
        raise RuntimeError(f"the consent page answered {status}: {body[:300]}")
    page = FormReader()
    page.feed(body)
    form = dict(page.fields, email=a.email, password=password, decision=decision)
    action = urllib.parse.urljoin(uri, page.action)
    answer_status, answer_headers, answer_body = fetch(a, action, form)
    return {"clientName": page.client_name, "frameOptions": headers.get("X-Frame-Options"),
            "hidden": sorted(page.fields)}, answer_status, answer_headers.get("Location"), answer_body


def main():
    parser = argparse.ArgumentParser()
    for name in ["oauth-host", "ca", "integration-key", "secret", "redirect-uri", "email", "password", "account"]:
        parser.add_argument("--" + name, required=True)
    a = parser.parse_args()
    Configuration().ssl_ca_cert = a.ca
    client = ApiClient(oauth_host_name=a.oauth_host)
    out = {}

    uri = client.get_authorization_uri(client_id=a.integration_key, scopes=["signature"], redirect_uri=a.redirect_uri,
                                       response_type="code", state="state-42")
    page, status, location, _ = consent(a, uri, "allow", a.password)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(location or "").query)
    out["allow"] = {"page": page, "status": status, "location": location,
                    "toRedirectURI": (location or "").startswith(a.redirect_uri + "?"),
                    "state": query.get("state", [None])[0], "hasCode": "code" in query}
    code = query.get("code", [""])[0]

    token = client.generate_access_token(a.integration_key, a.secret, code)
    out["token"] = {"tokenType": token.token_type, "expiresIn": token.expires_in, "hasAccessToken": bool(token.access_token)}
    info = client.get_user_info(token.access_token)
    account = info.get_accounts()[0]
    out["userInfo"] = {"email": info.email, "accountId": account.account_id, "baseUri": account.base_uri}
    client.host = account.base_uri + "/restapi"
    client.set_default_header("Authorization", "Bearer " + token.access_token)
    out["list"] = {"totalSetSize": EnvelopesApi(client).list_status_changes(a.account, from_date="2020-01-01").total_set_size}

    try:
        client.generate_access_token(a.integration_key, a.secret, code)
        out["reused"] = {"status": 200}
    except ApiException as e:
        out["reused"] = {"status": e.status, "body": json.loads(e.body or "{}")}

    _, _, location, _ = consent(a, uri, "allow", a.password)
    another = urllib.parse.parse_qs(urllib.parse.urlsplit(location or "").query).get("code", [""])[0]
    try:
        client.generate_access_token(a.integration_key, "not-the-secret", another)
        out["wrongSecret"] = {"status": 200}
    except ApiException as e:
        out["wrongSecret"] = {"status": e.status, "wwwAuthenticate": (e.headers or {}).get("WWW-Authenticate")}

    _, status, location, body = consent(a, uri, "allow", "not-the-password")
    out["wrongPassword"] = {"status": status, "location": location, "says": "Wrong email or password" in body}
    _, status, location, _ = consent(a, uri, "deny", "")
    out["deny"] = {"status": status, "location": location}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    try:
        main()
    except ApiException as e:
        print(f"unexpected ApiException {e.status}: {e.body}", file=sys.stderr)
        sys.exit(1)
