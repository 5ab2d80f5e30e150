#!/usr/bin/env python3
"""Writes Tests/McuMgrCoreTests/Fixtures/cbor-vectors.json: CBOR test vectors made with cbor2.

Each valid vector holds:
  hex          the input bytes
  canonical    (only when it differs from hex) what a definite-length, shortest-integer writer that keeps float widths, map order
               and tags produces for it (made by cbor2 from the same value written definite)
  item         the expected item as a typed tree:
                 {"u": "n"} unsigned, {"n": "n"} negative (value -1-n), {"b": hex}, {"t": text},
                 {"a": [...]}, {"m": [[k, v], ...]}, {"tag": "n", "v": item}, {"bool": b},
                 {"null": true}, {"undef": true}, {"simple": n},
                 {"f": 16|32|64, "bits": hex, "value": number|"NaN"|"Infinity"|"-Infinity"}
  description  what it covers
Every input is checked here: cbor2 must decode it to the same value, and (where the RFC gives the
bytes) cbor2 must encode the typed value to exactly those bytes.

Invalid vectors ({"hex", "description"}) are inputs cbor2 rejects; decoders must throw.

Usage: Scripts/cbor-vectors.py  (needs cbor2; e.g. .venv/bin/python Scripts/cbor-vectors.py)
"""

import importlib.metadata
import io
import json
from collections.abc import Mapping
import math
import os
import random
import struct
import sys

import cbor2


# ---------------------------------------------------------------------------------------------
# Value wrappers the typed tree needs beyond plain Python values.

class F:
    """A float written with a fixed width (16, 32 or 64 bits)."""

    def __init__(self, value, width):
        self.value = float(value)
        self.width = width

    def packed(self):
        fmt = {16: ">e", 32: ">f", 64: ">d"}[self.width]
        return struct.pack(fmt, self.value)


class Indef:
    """An indefinite-length container or string. For bytes/text, `value` is a list of chunks."""

    def __init__(self, kind, value):
        assert kind in ("bytes", "text", "array", "map")
        self.kind = kind
        self.value = value


def hook(encoder, value):
    if isinstance(value, F):
        encoder.write({16: b"\xf9", 32: b"\xfa", 64: b"\xfb"}[value.width] + value.packed())
    elif isinstance(value, Indef):
        encoder.write({"bytes": b"\x5f", "text": b"\x7f", "array": b"\x9f", "map": b"\xbf"}[value.kind])
        if value.kind == "map":
            for k, v in value.value.items():
                encoder.encode(k)
                encoder.encode(v)
        else:
            for x in value.value:
                encoder.encode(x)
        encoder.write(b"\xff")
    else:
        raise TypeError(f"cannot encode {value!r}")


def dumps(value):
    return cbor2.dumps(value, default=hook)


def definite(value):
    """The same value with indefinite-length wrappers replaced by plain containers."""
    if isinstance(value, Indef):
        if value.kind == "bytes":
            return b"".join(value.value)
        if value.kind == "text":
            return "".join(value.value)
        if value.kind == "array":
            return [definite(x) for x in value.value]
        return {definite(k): definite(v) for k, v in value.value.items()}
    if isinstance(value, list):
        return [definite(x) for x in value]
    if isinstance(value, dict):
        return {definite(k): definite(v) for k, v in value.items()}
    if isinstance(value, cbor2.CBORTag):
        return cbor2.CBORTag(value.tag, definite(value.value))
    return value


def plain(value):
    """The value as cbor2.loads returns it (floats as Python floats)."""
    value = definite(value)
    if isinstance(value, F):
        return struct.unpack({16: ">e", 32: ">f", 64: ">d"}[value.width], value.packed())[0]
    if isinstance(value, list):
        return [plain(x) for x in value]
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, cbor2.CBORTag):
        return cbor2.CBORTag(value.tag, plain(value.value))
    return value


def float_json(x):
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def typed(value):
    value = definite(value)
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        assert -(2**64) <= value < 2**64, value
        return {"u": str(value)} if value >= 0 else {"n": str(-1 - value)}
    if isinstance(value, bytes):
        return {"b": value.hex()}
    if isinstance(value, str):
        return {"t": value}
    if isinstance(value, list):
        return {"a": [typed(x) for x in value]}
    if isinstance(value, dict):
        return {"m": [[typed(k), typed(v)] for k, v in value.items()]}
    if isinstance(value, cbor2.CBORTag):
        return {"tag": str(value.tag), "v": typed(value.value)}
    if value is None:
        return {"null": True}
    if value is cbor2.undefined:
        return {"undef": True}
    if isinstance(value, cbor2.CBORSimpleValue):
        return {"simple": value.value}
    if isinstance(value, F):
        return {"f": value.width, "bits": value.packed().hex(), "value": float_json(plain(value))}
    raise TypeError(f"no typed form for {value!r}")


def same(a, b):
    """Equality that treats NaN as equal to NaN and keeps map order.

    `a` is what cbor2 decoded, `b` the expected value. cbor2 gives some tags meaning (dates, bignums,
    self-describe); those are accepted as they are, since the bytes are checked separately.
    """
    if isinstance(b, cbor2.CBORTag) and not isinstance(a, cbor2.CBORTag):
        if b.tag == 55799:
            return same(a, b.value)
        if b.tag in (0, 1, 2, 3):
            return True
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, (list, tuple)) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return len(a) == len(b) and all(same(ka, kb) and same(va, vb)
                                        for (ka, va), (kb, vb) in zip(a.items(), b.items()))
    if isinstance(a, cbor2.CBORTag) and isinstance(b, cbor2.CBORTag):
        return a.tag == b.tag and same(a.value, b.value)
    return type(a) is type(b) and a == b


VECTORS = []


def add(description, value, expect_hex=None):
    data = dumps(value)
    if expect_hex is not None:
        assert data.hex() == expect_hex, f"{description}: cbor2 wrote {data.hex()}, expected {expect_hex}"
    decoded = cbor2.loads(data)
    assert same(decoded, plain(value)), f"{description}: cbor2 read back {decoded!r}"
    canonical = dumps(definite(value))
    assert same(cbor2.loads(canonical), plain(value)), description
    vector = {"description": description, "hex": data.hex()}
    if canonical != data:
        vector["canonical"] = canonical.hex()
    vector["item"] = typed(value)
    VECTORS.append(vector)


# ---------------------------------------------------------------------------------------------
# Generated vectors.

def integers():
    boundaries = [0, 1, 10, 23, 24, 25, 100, 255, 256, 1000, 65535, 65536, 1000000,
                  2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**53, 2**63 - 1, 2**63, 2**64 - 1]
    for n in boundaries:
        add(f"unsigned {n}", n)
    for n in boundaries:
        add(f"negative {-1 - n}", -1 - n)
    for n in [-1, -24, -25, -256, -257, -65536, -65537, -(2**32), -(2**32) - 1, -(2**63), -(2**63) - 1]:
        add(f"negative {n}", n)


def strings():
    add("empty byte string", b"")
    add("empty text string", "")
    add("byte string 23 bytes", bytes(range(23)))
    add("byte string 24 bytes", bytes(range(24)))
    add("byte string 255 bytes", bytes(i % 256 for i in range(255)))
    add("byte string 256 bytes", bytes(i % 256 for i in range(256)))
    add("byte string 65536 bytes (4-byte length)", bytes((i * 7) % 256 for i in range(65536)))
    add("text 23 chars", "a" * 23)
    add("text 24 chars", "b" * 24)
    add("text 300 chars", "xyz" * 100)
    add("UTF-8 two-byte", "\u00fc")
    add("UTF-8 three-byte", "\u6c34")
    add("UTF-8 four-byte (surrogate pair in UTF-16)", "\U00010151")
    add("UTF-8 mixed", "Gr\u00fc\u00dfe, \u4e16\u754c \U0001f600 e\u0301")
    add("text with NUL and controls", "a\x00b\n\t\x7f")


def containers():
    add("empty array", [])
    add("empty map", {})
    add("array of 23", list(range(23)))
    add("array of 24", list(range(24)))
    add("array of 1000", [i % 300 for i in range(1000)])
    add("nested arrays", [[], [[]], [[[1, [2, [3]]]]]])
    add("map with text keys in order", {"z": 1, "a": 2, "m": 3})
    add("map with int keys", {1: "one", -1: "minus one", 0: "zero", 1000: "k"})
    add("map with mixed keys", {"a": 1, 2: "b", b"\x01": [1], -5: None})
    add("map of 30 entries", {f"k{i}": i for i in range(30)})
    add("SMP image state shaped", {"images": [{"slot": 0, "version": "1.2.3", "hash": bytes(range(32)),
                                              "bootable": True, "pending": False, "confirmed": True,
                                              "active": True, "permanent": False}],
                                   "splitStatus": 0})
    add("SMP upload request shaped", {"image": 0, "len": 1048576, "off": 0,
                                      "sha": bytes(range(32)), "data": bytes(range(256)) * 4,
                                      "upgrade": False})
    add("SMP v2 error shaped", {"err": {"group": 1, "rc": 9}})
    add("deep nesting 60", [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[0]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]])


def simple_and_floats():
    add("false", False)
    add("true", True)
    add("null", None)
    add("undefined", cbor2.undefined)
    for v in [0, 16, 19, 32, 100, 255]:
        add(f"simple({v})", cbor2.CBORSimpleValue(v))
    for v, w in [(0.0, 16), (-0.0, 16), (1.0, 16), (1.5, 16), (65504.0, 16), (5.960464477539063e-8, 16),
                 (6.103515625e-05, 16), (-4.0, 16), (math.inf, 16), (-math.inf, 16), (math.nan, 16),
                 (0.333251953125, 16),
                 (0.0, 32), (1.0, 32), (100000.0, 32), (3.4028234663852886e+38, 32), (1.401298464324817e-45, 32),
                 (math.inf, 32), (math.nan, 32), (-0.1, 32),
                 (0.0, 64), (1.1, 64), (1.0e+300, 64), (-4.1, 64), (5e-324, 64), (math.inf, 64), (math.nan, 64),
                 (-math.inf, 64), (math.pi, 64)]:
        add(f"float{w} {v}", F(v, w))
    add("floats in array", [F(1.5, 16), F(0.1, 32), F(0.1, 64)])


def tags():
    add("tag 0 text", cbor2.CBORTag(0, "2013-03-21T20:04:00Z"))
    add("tag 1 int", cbor2.CBORTag(1, 1363896240))
    add("tag 2 bignum", cbor2.CBORTag(2, b"\x01" + b"\x00" * 8))
    add("tag 24 embedded", cbor2.CBORTag(24, b"\x64IETF"))
    add("tag 55799 self-describe", cbor2.CBORTag(55799, {"a": 1}))
    add("tag 2^32", cbor2.CBORTag(2**32, 0))
    add("tag 2^64-1", cbor2.CBORTag(2**64 - 1, "x"))
    add("nested tags", cbor2.CBORTag(40000, cbor2.CBORTag(40001, [1, cbor2.CBORTag(40002, b"")])))


def indefinite():
    add("indefinite bytes, two chunks", Indef("bytes", [b"\x01\x02", b"\x03\x04\x05"]))
    add("indefinite bytes, no chunks", Indef("bytes", []))
    add("indefinite bytes, empty chunks", Indef("bytes", [b"", b"\xaa", b""]))
    add("indefinite text, two chunks", Indef("text", ["strea", "ming"]))
    add("indefinite text, UTF-8 chunks", Indef("text", ["\u00fc", "\U0001f600"]))
    add("indefinite empty array", Indef("array", []))
    add("indefinite array", Indef("array", [1, [2, 3], Indef("array", [4, 5])]))
    add("indefinite map", Indef("map", {"a": 1, "b": Indef("array", [2, 3])}))
    add("indefinite empty map", Indef("map", {}))
    add("SMP response, indefinite map", Indef("map", {"images": Indef("array", [
        Indef("map", {"slot": 0, "version": "0.0.0", "hash": bytes(32), "bootable": True})]),
        "splitStatus": 0}))
    add("indefinite long byte chunk", Indef("bytes", [bytes(300), bytes(256)]))


# ---------------------------------------------------------------------------------------------
# RFC 8949 Appendix A (value, hex as printed in the RFC).

def rfc():
    T = cbor2.CBORTag
    S = cbor2.CBORSimpleValue
    cases = [
        (0, "00"), (1, "01"), (10, "0a"), (23, "17"), (24, "1818"), (25, "1819"), (100, "1864"),
        (1000, "1903e8"), (1000000, "1a000f4240"), (1000000000000, "1b000000e8d4a51000"),
        (18446744073709551615, "1bffffffffffffffff"),
        (T(2, bytes.fromhex("010000000000000000")), "c249010000000000000000"),
        (-18446744073709551616, "3bffffffffffffffff"),
        (T(3, bytes.fromhex("010000000000000000")), "c349010000000000000000"),
        (-1, "20"), (-10, "29"), (-100, "3863"), (-1000, "3903e7"),
        (F(0.0, 16), "f90000"), (F(-0.0, 16), "f98000"), (F(1.0, 16), "f93c00"), (F(1.1, 64), "fb3ff199999999999a"),
        (F(1.5, 16), "f93e00"), (F(65504.0, 16), "f97bff"), (F(100000.0, 32), "fa47c35000"),
        (F(3.4028234663852886e+38, 32), "fa7f7fffff"), (F(1.0e+300, 64), "fb7e37e43c8800759c"),
        (F(5.960464477539063e-8, 16), "f90001"), (F(0.00006103515625, 16), "f90400"), (F(-4.0, 16), "f9c400"),
        (F(-4.1, 64), "fbc010666666666666"),
        (F(math.inf, 16), "f97c00"), (F(math.nan, 16), "f97e00"), (F(-math.inf, 16), "f9fc00"),
        (F(math.inf, 32), "fa7f800000"), (F(math.nan, 32), "fa7fc00000"), (F(-math.inf, 32), "faff800000"),
        (F(math.inf, 64), "fb7ff0000000000000"), (F(math.nan, 64), "fb7ff8000000000000"),
        (F(-math.inf, 64), "fbfff0000000000000"),
        (False, "f4"), (True, "f5"), (None, "f6"), (cbor2.undefined, "f7"), (S(16), "f0"), (S(255), "f8ff"),
        (T(0, "2013-03-21T20:04:00Z"), "c074323031332d30332d32315432303a30343a30305a"),
        (T(1, 1363896240), "c11a514b67b0"), (T(1, F(1363896240.5, 64)), "c1fb41d452d9ec200000"),
        (T(23, bytes.fromhex("01020304")), "d74401020304"), (T(24, bytes.fromhex("6449455446")), "d818456449455446"),
        (T(32, "http://www.example.com"), "d82076687474703a2f2f7777772e6578616d706c652e636f6d"),
        (b"", "40"), (bytes.fromhex("01020304"), "4401020304"),
        ("", "60"), ("a", "6161"), ("IETF", "6449455446"), ("\"\\", "62225c"), ("\u00fc", "62c3bc"),
        ("\u6c34", "63e6b0b4"), ("\U00010151", "64f0908591"),
        ([], "80"), ([1, 2, 3], "83010203"), ([1, [2, 3], [4, 5]], "8301820203820405"),
        (list(range(1, 26)), "98190102030405060708090a0b0c0d0e0f101112131415161718181819"),
        ({}, "a0"), ({1: 2, 3: 4}, "a201020304"), ({"a": 1, "b": [2, 3]}, "a26161016162820203"),
        (["a", {"b": "c"}], "826161a161626163"),
        ({"a": "A", "b": "B", "c": "C", "d": "D", "e": "E"}, "a56161614161626142616361436164614461656145"),
        (Indef("bytes", [bytes.fromhex("0102"), bytes.fromhex("030405")]), "5f42010243030405ff"),
        (Indef("text", ["strea", "ming"]), "7f657374726561646d696e67ff"),
        (Indef("array", []), "9fff"),
        (Indef("array", [1, [2, 3], Indef("array", [4, 5])]), "9f018202039f0405ffff"),
        (Indef("array", [1, [2, 3], [4, 5]]), "9f01820203820405ff"),
        ([1, [2, 3], Indef("array", [4, 5])], "83018202039f0405ff"),
        ([1, Indef("array", [2, 3]), [4, 5]], "83019f0203ff820405"),
        (Indef("array", list(range(1, 26))), "9f0102030405060708090a0b0c0d0e0f101112131415161718181819ff"),
        (Indef("map", {"a": 1, "b": Indef("array", [2, 3])}), "bf61610161629f0203ffff"),
        (["a", Indef("map", {"b": "c"})], "826161bf61626163ff"),
        (Indef("map", {"Fun": True, "Amt": -2}), "bf6346756ef563416d7421ff"),
    ]
    for value, hexstr in cases:
        add(f"RFC 8949 A: {hexstr}", value, expect_hex=hexstr)


# ---------------------------------------------------------------------------------------------
# Random structures (fixed seed) for broader coverage of nesting.

def random_value(rng, depth=0):
    choices = ["uint", "nint", "bytes", "text", "bool", "null", "float"]
    if depth < 4:
        choices += ["array", "map", "tag", "indef"] * 2
    kind = rng.choice(choices)
    if kind == "uint":
        return rng.choice([rng.randrange(24), rng.randrange(256), rng.randrange(65536), rng.randrange(2**32),
                           rng.randrange(2**64)])
    if kind == "nint":
        return -1 - rng.choice([rng.randrange(24), rng.randrange(2**16), rng.randrange(2**64)])
    if kind == "bytes":
        return bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 5, 30, 300])))
    if kind == "text":
        alphabet = "abcXYZ019 \u00e9\u00fc\u4e2d\U0001f680"
        return "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 4, 25, 100])))
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "float":
        w = rng.choice([16, 32, 64])
        v = rng.choice([0.0, 1.0, -2.5, 0.5, 1024.0]) if w == 16 else rng.uniform(-1e6, 1e6)
        if w == 32:
            v = struct.unpack(">f", struct.pack(">f", v))[0]
        return F(v, w)
    if kind == "array":
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(6))]
    if kind == "map":
        result = {}
        for _ in range(rng.randrange(6)):
            key = rng.choice([rng.randrange(1000) - 500, "k" + str(rng.randrange(1000))])
            result[key] = random_value(rng, depth + 1)
        return result
    if kind == "tag":
        return cbor2.CBORTag(rng.choice([6, 1000, 40000, 70000]), random_value(rng, depth + 1))
    # indefinite
    sub = rng.choice(["bytes", "text", "array", "map"])
    if sub == "bytes":
        return Indef("bytes", [bytes(rng.randrange(256) for _ in range(rng.randrange(5))) for _ in range(rng.randrange(4))])
    if sub == "text":
        return Indef("text", ["t" * rng.randrange(5) + "\u00e9" for _ in range(rng.randrange(4))])
    if sub == "array":
        return Indef("array", [random_value(rng, depth + 1) for _ in range(rng.randrange(5))])
    return Indef("map", {"i" + str(i): random_value(rng, depth + 1) for i in range(rng.randrange(5))})


def randoms():
    rng = random.Random(8949)
    for i in range(60):
        add(f"random structure #{i}", random_value(rng))


# ---------------------------------------------------------------------------------------------
# Invalid inputs: cbor2 must reject each.

INVALID = [
    ("", "empty input"),
    ("18", "uint: missing 1-byte argument"),
    ("19 01", "uint: truncated 2-byte argument"),
    ("1a 0102 03", "uint: truncated 4-byte argument"),
    ("1b 01020304050607", "uint: truncated 8-byte argument"),
    ("1c", "reserved additional information 28"),
    ("1d", "reserved additional information 29"),
    ("1e", "reserved additional information 30"),
    ("3c", "negative with reserved additional information"),
    ("1f", "indefinite-length unsigned integer"),
    ("3f", "indefinite-length negative integer"),
    ("df 00", "indefinite-length tag"),
    ("ff", "break at top level"),
    ("81 ff", "break inside definite array"),
    ("a1 ff", "break as map key"),
    ("42 01", "byte string shorter than its length"),
    ("63 6161", "text string shorter than its length"),
    ("5b ffffffffffffffff", "byte string with 2^64-1 length"),
    ("7b 7fffffffffffffff 00", "text string with a huge length"),
    ("9b ffffffffffffffff", "array with 2^64-1 items"),
    ("bb ffffffffffffffff", "map with 2^64-1 entries"),
    ("82 01", "array missing an item"),
    ("a1 01", "map missing a value"),
    ("5f 01 ff", "indefinite bytes with a non-string chunk"),
    ("5f 61 61 ff", "indefinite bytes with a text chunk"),
    ("7f 41 61 ff", "indefinite text with a byte chunk"),
    ("5f 5f 40 ff ff", "nested indefinite byte chunk"),
    ("7f 61 61", "indefinite text missing break"),
    ("9f 01 02", "indefinite array missing break"),
    ("bf 61 61 01", "indefinite map missing break"),
    ("bf 61 61 ff", "indefinite map with a key but no value"),
    ("62 c3 28", "invalid UTF-8 continuation"),
    ("61 ff", "invalid UTF-8 byte 0xff"),
    ("63 ed a0 80", "UTF-8-encoded surrogate"),
    ("62 c0 80", "overlong UTF-8"),
    ("f8 00", "two-byte simple value 0"),
    ("f8 1f", "two-byte simple value 31"),
    ("f9 00", "truncated half float"),
    ("fa 0000 00", "truncated single float"),
    ("fb 00000000 000000", "truncated double float"),
    ("fc", "major 7 reserved 28"),
    ("c1", "tag without content"),
    ("01 01", "trailing byte"),
    ("a0 00", "trailing byte after map"),
]


def invalid():
    result = []
    for hexstr, description in INVALID:
        data = bytes.fromhex(hexstr.replace(" ", ""))
        stream = io.BytesIO(data)
        try:
            cbor2.CBORDecoder(stream).decode()
        except Exception:
            pass
        else:
            if stream.read():
                pass  # cbor2 leaves trailing bytes to the caller; a whole-input decode must reject them
            else:
                raise AssertionError(f"cbor2 accepted invalid input {hexstr!r} ({description})")
        result.append({"description": description, "hex": data.hex()})
    return result


def main():
    integers()
    strings()
    containers()
    simple_and_floats()
    tags()
    indefinite()
    rfc()
    randoms()
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(here, "..", "Tests", "McuMgrCoreTests", "Fixtures", "cbor-vectors.json")
    doc = {
        "generator": "Scripts/cbor-vectors.py",
        "cbor2": importlib.metadata.version("cbor2"),
        "valid": VECTORS,
        "invalid": invalid(),
    }
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        # One vector per line: readable diffs without a huge file.
        f.write("{\n")
        f.write(f' "generator": {json.dumps(doc["generator"])},\n "cbor2": {json.dumps(doc["cbor2"])},\n')
        for name in ("valid", "invalid"):
            lines = [json.dumps(v, ensure_ascii=False) for v in doc[name]]
            f.write(f' "{name}": [\n  ' + ",\n  ".join(lines) + "\n ]" + ("," if name == "valid" else "") + "\n")
        f.write("}\n")
    print(f"wrote {len(VECTORS)} valid and {len(doc['invalid'])} invalid vectors to {os.path.normpath(out)}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
