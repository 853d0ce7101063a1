#!/usr/bin/env python3
"""make_corpus.py - regenerates the seed corpora of tests/fuzz/ from the fixtures.

    python3 tests/fuzz/make_corpus.py      (from the repository root)

corpus_api/: one seed per fixtures/api/<case>/request.json, in fuzz_api.c's
input layout (flags byte, path[?pairs], '\n', body), plus a few seeds for what
the fixtures do not reach (other strategies, no connection, the 413 boundary,
no lookup hook, bearer tokens signed with fuzz_api.c's FUZZ_AUTH_SECRET,
Idempotency-Key headers).
corpus_fixture/: fixtures/demo.json (as is and compact) and one seed per kind
of refusal api_fixture_parse() gives. Both folders are rewritten from scratch.
"""
import base64
import hashlib
import hmac
import json
import os
import shutil
import sys

METHODS = ["GET", "POST", "HEAD", "PUT", "DELETE", "post", "OPTIONS", ""]  # fuzz_api.c's table
STORE_ITEM, STORE_OPTIMISTIC, STORE_NONE = 1 << 3, 2 << 3, 3 << 3
PAD_413, AUTH, NO_LOOKUP = 0x20, 0x40, 0x80
AUTH_SECRET = b"fuzz-secret"  # FUZZ_AUTH_SECRET in fuzz_api.c
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def api_seed(method, path, query=None, body=None, flags=0):
    """body None: no separator, so fuzz_api passes a NULL body."""
    if isinstance(path, str):
        path = path.encode()
    if query:
        path += ("?" + "&".join(f"{k}={v}" for k, v in query.items())).encode()
    seed = bytes([METHODS.index(method) | flags]) + path
    return seed if body is None else seed + b"\n" + body


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(player):
    """api_token_make(): an HS256 JWT {"sub": player, "iat", "exp"}, valid until 2100 so that
    the seeds stay good."""
    head = b64url(b'{"alg":"HS256","typ":"JWT"}')
    body = b64url(('{"sub":"%s","iat":1700000000,"exp":4102444800}' % player).encode())
    mac = hmac.new(AUTH_SECRET, (head + "." + body).encode(), hashlib.sha256).digest()
    return head + "." + body + "." + b64url(mac)


def write(folder, name, data):
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def api_corpus(out):
    cases = os.path.join(ROOT, "fixtures", "api")
    n = 0
    for case in sorted(os.listdir(cases)):
        with open(os.path.join(cases, case, "request.json"), encoding="utf-8") as f:
            req = json.load(f)
        body = req.get("body")
        if body is None:
            raw = None
        elif isinstance(body, str):  # sent verbatim, as the fixture runner does
            raw = body.encode("utf-8", "surrogatepass")
        else:
            raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        write(out, case, api_seed(req["method"], req["path"], req.get("query"), raw))
        n += 1
    buy = b'{"buyer":"B","seller":"A","item":"axe","price":500}'
    extra = {
        "x-purchase-item-strategy": api_seed("POST", "/purchase", body=buy, flags=STORE_ITEM),
        "x-purchase-optimistic": api_seed("POST", "/purchase", body=buy, flags=STORE_OPTIMISTIC),
        "x-purchase-no-conn": api_seed("POST", "/purchase", body=buy, flags=STORE_NONE),
        "x-list-ok": api_seed("POST", "/list", body=b'{"seller":"A","item":"axe","price":1}'),
        "x-list-duration": api_seed("POST", "/list",
                                    body=b'{"seller":"A","item":"axe","price":1,"duration_s":60}'),
        "x-auction": api_seed("POST", "/auctions",
                              body=b'{"seller":"A","item":"axe","start_bid":5,"duration_s":60}'),
        "x-auction-bid": api_seed("POST", "/auctions/1/bid", body=b'{"bidder":"B","amount":9}'),
        "x-auctions": api_seed("GET", "/auctions", {"item": "axe", "limit": "2"}),
        "x-direct": api_seed("POST", "/trades/direct",
                             body=b'{"from":"A","to":"B","give":{"items":["axe"],"units":{"ore":3},'
                                  b'"funds":5},"get":{"funds":9},"duration_s":60}'),
        "x-direct-accept": api_seed("POST", "/trades/direct/1/accept", body=b'{"player":"B"}'),
        "x-direct-cancel": api_seed("POST", "/trades/direct/1/cancel", body=b'{"player":"A"}'),
        "x-direct-get": api_seed("GET", "/trades/direct/1"),
        "x-player-direct": api_seed("GET", "/players/A/direct"),
        "x-list-duration-no-conn": api_seed(
            "POST", "/list", body=b'{"seller":"A","item":"axe","price":1,"duration_s":60}',
            flags=STORE_NONE),
        "x-unlist-ok": api_seed("POST", "/unlist", {"limit": "1"},
                                body=b'{"seller":"A","item":"axe"}', flags=NO_LOOKUP),
        "x-purchase-idem-key": api_seed("POST", "/purchase", {"Idempotency-Key": "order-1:a.b"},
                                        body=buy, flags=STORE_ITEM),
        "x-list-idem-key-bad": api_seed("POST", "/list", {"idempotency-key": "no spaces"},
                                        body=b'{"seller":"A","item":"axe","price":1}'),
        "x-purchase-413": api_seed("POST", "/purchase", body=buy, flags=PAD_413),
        "x-purchase-empty-body": api_seed("POST", "/purchase", body=b""),
        "x-auth-purchase-ok": api_seed("POST", "/purchase", {"Authorization": "Bearer " + token("B")},
                                       body=buy, flags=AUTH),
        "x-auth-purchase-other": api_seed("POST", "/purchase",
                                          {"authorization": "Bearer " + token("A")},
                                          body=buy, flags=AUTH | STORE_NONE),
        "x-auth-list-forged": api_seed("POST", "/list", {"Authorization": "Bearer A." + "0" * 64},
                                       body=b'{"seller":"A","item":"axe","price":1}', flags=AUTH),
        "x-auth-unlist-missing": api_seed("POST", "/unlist", body=b'{"seller":"A","item":"axe"}',
                                          flags=AUTH | STORE_ITEM),
        "x-market-query": api_seed("GET", "/market", {"limit": "1000", "offset": "999"}),
        "x-market-bare-arg": api_seed("GET", "/market?limit&offset=1"),
        "x-healthz-no-conn": api_seed("GET", "/healthz", flags=STORE_NONE),
        "x-player-utf8": api_seed("GET", "/players/\u00e9t\u00e9"),
        "x-error-bad-utf8": api_seed("GET", b"/\xff\xfe", body=b"\xc3\x28 detail \xed\xa0\x80"),
        "x-unknown-field-utf8": api_seed(
            "POST", "/unlist", body='{"seller":"A","item":"x","\u00e9\u00e9\u00e9\u00e9\u00e9'
            '\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9'
            '\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9":1}'.encode()),
    }
    for name, data in extra.items():
        write(out, name, data)
    return n + len(extra)


FIXTURES = {
    "empty-players": '{"players":[]}',
    "one-of-each": '{"players":[{"id":"A","name":"Alice","funds":100,"inventory":["sword-1"]},'
                   '{"id":"B","funds":0}],"listings":[{"item":"axe","seller":"A","price":500}]}',
    "limits": '{"players":[{"id":"A","funds":9223372036854775807,"inventory":[]}],'
              '"listings":[{"item":"x","seller":"A","price":1000000000000}]}',
    "not-json": "players: A",
    "trailing": '{"players":[]} {}',
    "dup-key": '{"players":[],"players":[]}',
    "missing-players": "{}",
    "players-object": '{"players":{}}',
    "unknown-top": '{"players":[],"items":[]}',
    "player-no-funds": '{"players":[{"id":"A"}]}',
    "player-name-number": '{"players":[{"id":"A","funds":1},{"id":"B","name":5,"funds":1}]}',
    "inventory-mixed": '{"players":[{"id":"A","funds":1,"inventory":["x",3]}]}',
    "funds-negative": '{"players":[{"id":"A","funds":-1}]}',
    "id-dot": '{"players":[{"id":"A.B","funds":1}]}',
    "price-zero": '{"players":[{"id":"A","funds":1}],'
                  '"listings":[{"item":"x","seller":"A","price":0}]}',
    "dup-player": '{"players":[{"id":"A","funds":1},{"id":"B","funds":1},{"id":"A","funds":2}]}',
    "dup-item": '{"players":[{"id":"A","funds":1,"inventory":["axe"]},'
                '{"id":"B","funds":1,"inventory":["bow","axe"]}]}',
    "dup-item-listing": '{"listings":[{"item":"axe","seller":"A","price":5}],'
                        '"players":[{"id":"A","funds":1,"inventory":["axe"]}]}',
    "unknown-seller": '{"players":[{"id":"A","funds":1}],"listings":['
                      '{"item":"axe","seller":"A","price":5},{"item":"bow","seller":"Z","price":5}]}',
    "name-utf8": '{"players":[{"id":"A","name":"\u00c9lodie \u2603","funds":1}]}',
    "nul-byte": '{"players":[]}\u0000',
    "auctions": '{"players":[{"id":"A","funds":1,"inventory":["axe"],"stacks":{"ore":5}}],'
                '"auctions":[{"seller":"A","item":"axe","start_bid":10,"duration_s":60,'
                '"buyout":90,"min_increment":5},{"seller":"A","item":"ore","quantity":3,'
                '"start_bid":2,"duration_s":60}]}',
    "auction-not-held": '{"players":[{"id":"A","funds":1}],"auctions":[{"seller":"A",'
                        '"item":"axe","start_bid":1,"duration_s":60}]}',
}


def fixture_corpus(out):
    with open(os.path.join(ROOT, "fixtures", "demo.json"), "rb") as f:
        demo = f.read()
    write(out, "demo", demo)
    write(out, "demo-compact", json.dumps(json.loads(demo), separators=(",", ":")).encode())
    for name, text in FIXTURES.items():
        write(out, name, text.encode())
    return 2 + len(FIXTURES)


def main():
    counts = []
    for name, fill in (("corpus_api", api_corpus), ("corpus_fixture", fixture_corpus)):
        out = os.path.join(HERE, name)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        counts.append(f"{name}: {fill(out)} files")
    print("make_corpus: " + ", ".join(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
