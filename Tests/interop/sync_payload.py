#!/usr/bin/env python3
"""Builds a SignFleet sync item payload that the coordinator accepts, independently of the
Swift code, from docs/sync-payload.md alone.

    python3 Tests/interop/sync_payload.py --seed <64 hex digits> --device-id D --sequence N \
        --transaction-id T [--pdf FILE --page-count N]
    python3 Tests/interop/sync_payload.py --example            # the doc's worked example (JSON)
    python3 Tests/interop/sync_payload.py --example --annotate # the doc's annotated hex listings

Prints one JSON object: {"payload": hex, "signature": hex, "publicKey": hex, "deviceID": str,
"transactionID": str, "sequence": int, "payloadSHA256": hex}. `payload` and `signature` are the
`payload` and `signature` of a `sync.push` item (docs/protocol.md); `publicKey` is the raw
Ed25519 key the device enrolls with `device.enroll`.

Needs the `msgpack` (1.0 or later) and `cryptography` packages. Before printing, the script checks
its own output with the coordinator's checks as the doc lists them (`verify` below) and exits
with status 1 if one fails.
"""

import argparse
import hashlib
import json
import struct
import sys

import msgpack
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

FORMAT = "signfleet.envelope/1"

# --- The worked example of docs/sync-payload.md -------------------------------------------

EXAMPLE_SEED = bytes(range(32))  # 00 01 02 ... 1f
EXAMPLE_DEVICE_ID = "tablet-7"
EXAMPLE_SEQUENCE = 1
EXAMPLE_TRANSACTION_ID = "tx-0001"
EXAMPLE_ENVELOPE_ID = "local-0001"

# A one-page PDF, as small as a PDF gets (the coordinator only hashes it).
EXAMPLE_PDF = (
    b"%PDF-1.4\n"
    b"1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
    b"2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
    b"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 612 792]>>endobj\n"
    b"trailer<</Root 1 0 R>>\n"
    b"%%EOF\n"
)

# The ISO/IEC 19794-7 record of docs/signature-format.md (three samples at 200 Hz).
EXAMPLE_ISO = bytes.fromhex(
    "53444900 20313000 c160"
    "e0b48003e8044c"
    "e0b480079e07d0"
    "80bc80"
    "60000003ff"
    "6000000001"
    "00 00 000003"
    "03e807d000000200 0001"
    "041a07b7000103ff 0001"
    "044c079e00020000 0000".replace(" ", "")
)

# 2026-11-21T12:00:00Z and later instants, in nanoseconds since the Unix epoch.
T0 = 1_795_262_400_000_000_000
EXAMPLE_CREATED = T0
EXAMPLE_CAPTURE_STARTED = T0 + 60_000_000_000           # 12:01:00
EXAMPLE_CAPTURE_COMPLETED = T0 + 62_750_000_000         # 12:01:02.75
EXAMPLE_COMPLETED_LOCALLY = T0 + 65_000_000_000         # 12:01:05


# --- SignatureBinding (docs/sync-payload.md, "The signature binding") ----------------------

def binding_bytes(document_sha256, iso_sha256, field_id, signer_id, started_nanos, completed_nanos):
    """The binding's canonical bytes: "SFSB", version 1, then six length-prefixed fields."""
    assert len(document_sha256) == 32 and len(iso_sha256) == 32

    def field(raw):
        return struct.pack(">I", len(raw)) + raw

    return (
        b"SFSB"
        + struct.pack(">H", 1)
        + field(document_sha256)
        + field(iso_sha256)
        + field(field_id.encode("utf-8"))
        + field(signer_id.encode("utf-8"))
        + field(struct.pack(">q", started_nanos))
        + field(struct.pack(">q", completed_nanos))
    )


def parse_binding(raw):
    """Strict decoding as the coordinator does it; raises ValueError."""
    offset = 0

    def take(n):
        nonlocal offset
        if len(raw) - offset < n:
            raise ValueError(f"binding truncated at byte {offset}")
        chunk = raw[offset:offset + n]
        offset += n
        return chunk

    def field(expected=None):
        length = struct.unpack(">I", take(4))[0]
        if expected is not None and length != expected:
            raise ValueError(f"binding field has length {length}, expected {expected}")
        if length > 1 << 20:
            raise ValueError("binding field too long")
        return take(length)

    if take(4) != b"SFSB":
        raise ValueError("binding magic is not SFSB")
    if struct.unpack(">H", take(2))[0] != 1:
        raise ValueError("binding version is not 1")
    document_sha256 = field(32)
    iso_sha256 = field(32)
    field_id = field().decode("utf-8")
    signer_id = field().decode("utf-8")
    started = struct.unpack(">q", field(8))[0]
    completed = struct.unpack(">q", field(8))[0]
    if offset != len(raw):
        raise ValueError("trailing bytes after the binding")
    return document_sha256, iso_sha256, field_id, signer_id, started, completed


# --- The payload (docs/sync-payload.md, "The payload") -------------------------------------

def build(seed, device_id, sequence, transaction_id, envelope_id, pdf=EXAMPLE_PDF, page_count=1):
    """Returns (payload bytes, payload signature, public key, binding bytes, binding signature)."""
    key = Ed25519PrivateKey.from_private_bytes(seed)
    public_key = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    document_sha256 = hashlib.sha256(pdf).digest()
    binding = binding_bytes(
        document_sha256, hashlib.sha256(EXAMPLE_ISO).digest(), "sig-1", "Ada Lovelace",
        EXAMPLE_CAPTURE_STARTED, EXAMPLE_CAPTURE_COMPLETED)
    binding_signature = key.sign(binding)

    # Python dicts keep insertion order: each dict below lists its keys in the doc's order,
    # leaving out the optional keys this envelope does not have (templateId; email,
    # clientUserId, declineReason; label, name, value, groupName).
    payload = {
        "format": FORMAT,
        "deviceId": device_id,
        "sequence": sequence,
        "envelopeId": envelope_id,
        "transactionId": transaction_id,
        "signingMode": "offline",
        "name": "Lease",
        "emailSubject": "Please sign",
        "emailMessage": "",
        "createdAtNanos": EXAMPLE_CREATED,
        "completedLocallyAtNanos": EXAMPLE_COMPLETED_LOCALLY,
        "documents": [
            {
                "documentId": "1",
                "name": "lease.pdf",
                "pageCount": page_count,
                "sha256": document_sha256,
                "pdf": pdf,
            }
        ],
        "recipients": [
            {
                "recipientId": "1",
                "type": "inPersonSigner",
                "name": "Ada Lovelace",
                "routingOrder": 1,
                "hostName": "Grace Hopper",
                "hostEmail": "grace@example.com",
                "status": "signed",
                "statusChangedAtNanos": EXAMPLE_COMPLETED_LOCALLY,
            }
        ],
        "tabs": [
            {
                "type": "signHere",
                "tabId": "sig-1",
                "documentId": "1",
                "recipientId": "1",
                "pageNumber": 1,
                "frame": {"x": 72.0, "y": 650.0, "width": 200.0, "height": 50.0},
                "scale": 1.0,
                "locked": False,
                "optional": False,
                "selected": False,
            }
        ],
        "customFields": {"text": [], "list": []},
        "signatures": [
            {
                "tabIndex": 0,
                "recipientId": "1",
                "documentId": "1",
                "fieldId": "sig-1",
                "isoRecord": EXAMPLE_ISO,
                "binding": binding,
                "bindingSignature": binding_signature,
            }
        ],
    }
    # use_bin_type: bytes -> bin, str -> str (with str8); ints in the smallest format;
    # floats as float64; dicts as maps in insertion order.
    payload_bytes = msgpack.packb(payload, use_bin_type=True)
    assert payload_bytes == encode_annotated(payload)[0], "msgpack and the doc's rules disagree"
    return payload_bytes, key.sign(payload_bytes), public_key, binding, binding_signature


# --- The coordinator's checks (docs/sync-payload.md, "What the coordinator checks") --------

REQUIRED = {
    "payload": ["format", "deviceId", "sequence", "envelopeId", "transactionId", "signingMode", "name",
                "emailSubject", "emailMessage", "createdAtNanos", "documents", "recipients", "tabs",
                "customFields", "signatures"],
    "document": ["documentId", "name", "pageCount", "sha256", "pdf"],
    "recipient": ["recipientId", "type", "name", "routingOrder", "status"],
    "signature": ["tabIndex", "recipientId", "documentId", "fieldId", "isoRecord", "binding", "bindingSignature"],
}


def verify(payload_bytes, signature, public_key, device_id, sequence, transaction_id):
    """Returns None when the item would be applied, else why not (a short reason)."""
    key = Ed25519PublicKey.from_public_bytes(public_key)
    try:
        key.verify(signature, payload_bytes)
    except Exception:
        return "bad_signature: the payload signature does not verify"
    try:
        payload = msgpack.unpackb(payload_bytes, raw=False, strict_map_key=True)
    except Exception as error:
        return f"rejected: not MessagePack: {error}"
    for name in REQUIRED["payload"]:
        if name not in payload:
            return f"rejected: missing {name}"
    if payload["format"] != FORMAT:
        return "rejected: unknown format"
    if (payload["deviceId"], payload["sequence"], payload["transactionId"]) != (device_id, sequence, transaction_id):
        return "rejected: device, sequence or transaction differ from the item's"
    documents = {}
    for document in payload["documents"]:
        if any(name not in document for name in REQUIRED["document"]):
            return "rejected: document misses a key"
        if hashlib.sha256(document["pdf"]).digest() != bytes(document["sha256"]):
            return f"rejected: document {document['documentId']} does not match its SHA-256"
        documents[document["documentId"]] = document
    for recipient in payload["recipients"]:
        if any(name not in recipient for name in REQUIRED["recipient"]):
            return "rejected: recipient misses a key"
    ids = [recipient["recipientId"] for recipient in payload["recipients"]]
    if len(ids) != len(set(ids)):
        return "not storable: recipient ids repeat"
    for entry in payload["signatures"]:
        if any(name not in entry for name in REQUIRED["signature"]):
            return "rejected: signature misses a key"
        document = documents.get(entry["documentId"])
        if document is None:
            return f"rejected: signature for tab {entry['tabIndex']} names an unknown document"
        try:
            document_sha256, iso_sha256, *_ = parse_binding(bytes(entry["binding"]))
        except (ValueError, UnicodeDecodeError) as error:
            return f"rejected: binding unreadable: {error}"
        if document_sha256 != bytes(document["sha256"]) or hashlib.sha256(bytes(entry["isoRecord"])).digest() != iso_sha256:
            return "rejected: binding does not match its document or ISO record"
        try:
            key.verify(bytes(entry["bindingSignature"]), bytes(entry["binding"]))
        except Exception:
            return "rejected: binding signature does not verify"
    return None


# --- An encoder that explains itself, for the doc's listings --------------------------------

def _count(n, one, many):
    return f"{n} {one if n == 1 else many}"


def _str_header(n):
    size = _count(n, "byte", "bytes")
    if n < 32:
        return bytes([0xA0 | n]), f"fixstr, {size}"
    if n < 1 << 8:
        return bytes([0xD9, n]), f"str8, {size}"
    if n < 1 << 16:
        return b"\xda" + struct.pack(">H", n), f"str16, {size}"
    return b"\xdb" + struct.pack(">I", n), f"str32, {size}"


def _bin_header(n):
    size = _count(n, "byte", "bytes")
    if n < 1 << 8:
        return bytes([0xC4, n]), f"bin8, {size}"
    if n < 1 << 16:
        return b"\xc5" + struct.pack(">H", n), f"bin16, {size}"
    return b"\xc6" + struct.pack(">I", n), f"bin32, {size}"


def _int(v):
    if 0 <= v < 128:
        return bytes([v]), "positive fixint"
    if v >= 0:
        for marker, fmt, name, limit in ((0xCC, ">B", "uint8", 1 << 8), (0xCD, ">H", "uint16", 1 << 16),
                                         (0xCE, ">I", "uint32", 1 << 32), (0xCF, ">Q", "uint64", 1 << 64)):
            if v < limit:
                return bytes([marker]) + struct.pack(fmt, v), name
    if v >= -32:
        return struct.pack(">b", v), "negative fixint"
    for marker, fmt, name, limit in ((0xD0, ">b", "int8", 1 << 7), (0xD1, ">h", "int16", 1 << 15),
                                     (0xD2, ">i", "int32", 1 << 31), (0xD3, ">q", "int64", 1 << 63)):
        if v >= -limit:
            return bytes([marker]) + struct.pack(fmt, v), name
    raise ValueError(v)


def _container_header(n, is_map):
    if n < 16:
        return bytes([(0x80 if is_map else 0x90) | n]), f"fix{'map' if is_map else 'array'}"
    marker16, marker32 = (0xDE, 0xDF) if is_map else (0xDC, 0xDD)
    if n < 1 << 16:
        return bytes([marker16]) + struct.pack(">H", n), f"{'map' if is_map else 'array'}16"
    return bytes([marker32]) + struct.pack(">I", n), f"{'map' if is_map else 'array'}32"


def _scalar(value):
    """(bytes, description) of a value that is not a container."""
    if value is None:
        return b"\xc0", "nil"
    if value is True or value is False:
        return (b"\xc3", "true") if value else (b"\xc2", "false")
    if isinstance(value, int):
        raw, kind = _int(value)
        return raw, f"{kind} {value}"
    if isinstance(value, float):
        return b"\xcb" + struct.pack(">d", value), f"float64 {value!r}"
    if isinstance(value, str):
        body = value.encode("utf-8")
        header, kind = _str_header(len(body))
        return header + body, f'{kind} "{value}"'
    raise TypeError(type(value))


def encode_annotated(value, label="", indent=0, lines=None):
    """Returns (bytes, lines); each line is (indent, hex bytes, comment)."""
    if lines is None:
        lines = []
    out = bytearray()

    def emit(raw, comment, level):
        lines.append((level, raw, comment))
        out.extend(raw)

    if isinstance(value, dict):
        header, kind = _container_header(len(value), True)
        emit(header, f"{label}{kind}, {_count(len(value), 'entry', 'entries')}", indent)
        for key, item in value.items():
            key_raw, _ = _scalar(key)
            if isinstance(item, (dict, list, bytes)):
                emit(key_raw, f'"{key}"', indent + 1)
                raw, _ = encode_annotated(item, "", indent + 1, lines)
                out.extend(raw)
            else:
                raw, desc = _scalar(item)
                if len(key_raw) + len(raw) <= 16:
                    emit(key_raw + raw, f'"{key}": {desc}', indent + 1)
                else:
                    emit(key_raw, f'"{key}"', indent + 1)
                    emit(raw, desc, indent + 1)
    elif isinstance(value, list):
        header, kind = _container_header(len(value), False)
        emit(header, f"{label}{kind}, {_count(len(value), 'element', 'elements')}", indent)
        for index, item in enumerate(value):
            raw, _ = encode_annotated(item, f"[{index}] ", indent + 1, lines)
            out.extend(raw)
    elif isinstance(value, bytes):
        header, kind = _bin_header(len(value))
        emit(header, f"{label}{kind}", indent)
        for start in range(0, len(value), 16):
            emit(value[start:start + 16], "", indent + 1)
    else:
        raw, desc = _scalar(value)
        emit(raw, f"{label}{desc}", indent)
    return bytes(out), lines


def render(lines, width=58):
    text = []
    for level, raw, comment in lines:
        hexes = " ".join(f"{b:02x}" for b in raw)
        prefix = "  " * level
        chunks = [hexes[i:i + 48] for i in range(0, len(hexes), 48)] or [""]
        for number, chunk in enumerate(chunks):
            left = (prefix + chunk.strip()).ljust(width)
            text.append((left + (comment if number == 0 else "")).rstrip())
    return "\n".join(text)


def render_binding(binding):
    rows = [
        (binding[0:4], 'magic "SFSB"'),
        (binding[4:6], "version 1"),
    ]
    offset = 6
    names = ["document SHA-256", "ISO record SHA-256", "field id", "signer id", "capture start (ns)", "capture completion (ns)"]
    for name in names:
        length = struct.unpack(">I", binding[offset:offset + 4])[0]
        body = binding[offset + 4:offset + 4 + length]
        if name.endswith("(ns)"):
            desc = f"{name}: {length} bytes, {struct.unpack('>q', body)[0]}"
        elif name.endswith("id"):
            desc = f'{name}: {length} bytes, "{body.decode()}"'
        else:
            desc = f"{name}: {length} bytes"
        rows.append((binding[offset:offset + 4 + min(length, 12)], desc))
        for start in range(12, length, 16):
            rows.append((body[start:start + 16], ""))
        offset += 4 + length
    assert offset == len(binding)
    return render([(0, raw, comment) for raw, comment in rows])


def hexdump(raw, per_line=32):
    return "\n".join(raw[i:i + per_line].hex() for i in range(0, len(raw), per_line))


# --- Command line ----------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--example", action="store_true", help="the worked example of docs/sync-payload.md")
    parser.add_argument("--annotate", action="store_true", help="with --example: print the doc's listings")
    parser.add_argument("--seed", help="32-byte Ed25519 seed (private key), 64 hex digits")
    parser.add_argument("--device-id")
    parser.add_argument("--sequence", type=int)
    parser.add_argument("--transaction-id")
    parser.add_argument("--envelope-id", help="device-local envelope id (default: local-<transaction id>)")
    parser.add_argument("--pdf", help="embed this file as the document instead of the tiny example PDF")
    parser.add_argument("--page-count", type=int, default=1)
    args = parser.parse_args()

    if args.example:
        seed, device_id, sequence, transaction_id, envelope_id = (
            EXAMPLE_SEED, EXAMPLE_DEVICE_ID, EXAMPLE_SEQUENCE, EXAMPLE_TRANSACTION_ID, EXAMPLE_ENVELOPE_ID)
    else:
        missing = [name for name in ("seed", "device_id", "sequence", "transaction_id") if getattr(args, name) is None]
        if missing:
            parser.error("give --example, or all of --seed, --device-id, --sequence, --transaction-id")
        seed = bytes.fromhex(args.seed)
        if len(seed) != 32:
            parser.error("--seed must be 32 bytes (64 hex digits)")
        if not 1 <= args.sequence <= (1 << 63) - 1:
            parser.error("--sequence must be from 1 to 2^63 - 1")
        device_id, sequence, transaction_id = args.device_id, args.sequence, args.transaction_id
        envelope_id = args.envelope_id or f"local-{transaction_id}"
    pdf = EXAMPLE_PDF
    if args.pdf:
        with open(args.pdf, "rb") as handle:
            pdf = handle.read()

    payload, signature, public_key, binding, binding_signature = build(
        seed, device_id, sequence, transaction_id, envelope_id, pdf=pdf, page_count=args.page_count)
    problem = verify(payload, signature, public_key, device_id, sequence, transaction_id)
    if problem:
        print(f"self-check failed: {problem}", file=sys.stderr)
        sys.exit(1)

    if args.example and args.annotate:
        decoded = msgpack.unpackb(payload, raw=False)
        _, lines = encode_annotated(decoded, "SyncPayload: ")
        sections = [
            ("seed", seed.hex()),
            ("public key", public_key.hex()),
            ("document SHA-256", hashlib.sha256(pdf).hexdigest()),
            ("ISO record SHA-256", hashlib.sha256(EXAMPLE_ISO).hexdigest()),
            ("binding (" + str(len(binding)) + " bytes)", render_binding(binding)),
            ("binding SHA-256", hashlib.sha256(binding).hexdigest()),
            ("binding signature", hexdump(binding_signature)),
            ("payload (" + str(len(payload)) + " bytes)", render(lines)),
            ("payload, plain hex", hexdump(payload)),
            ("payload SHA-256", hashlib.sha256(payload).hexdigest()),
            ("payload signature", hexdump(signature)),
        ]
        for title, body in sections:
            print(f"== {title}\n{body}\n")
        return

    print(json.dumps({
        "payload": payload.hex(),
        "signature": signature.hex(),
        "publicKey": public_key.hex(),
        "deviceID": device_id,
        "transactionID": transaction_id,
        "sequence": sequence,
        "payloadSHA256": hashlib.sha256(payload).hexdigest(),
    }, indent=2))


if __name__ == "__main__":
    main()
