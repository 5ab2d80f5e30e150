import Foundation
import TestSupport
import Testing

/// Locates the Python that has `imgtool` (MCUboot's image tool) for cross-checks.
///
/// Uses `SMP_TEST_PYTHON` if set, else `<package root>/.venv/bin/python`. CI always creates `.venv` with
/// imgtool in the package root.
enum ImgtoolPython {
    /// True when the interpreter exists and can import imgtool (checked once).
    static let isAvailable: Bool = TestPython.hasModule("imgtool.main")

    /// The reason shown when an imgtool test is skipped.
    static let skipReason: Comment =
        "needs a Python with imgtool: set SMP_TEST_PYTHON or create .venv in the package root (pip install imgtool)"

    static func run(script: String, input: String) throws -> String {
        try TestPython.run(script: script, input: input)
    }

    /// What imgtool says about one image it signed.
    struct Report: Decodable {
        /// `dumpinfo`'s header lines.
        var version: String
        var hdrSize: Int
        var protectedTLVSize: Int
        var imgSize: Int
        /// `ih_flags`, read with `struct` (dumpinfo prints names).
        var flags: Int
        var loadAddr: Int
        /// TLV types `dumpinfo` lists in the protected and unprotected areas.
        var protectedTypes: [Int]
        var unprotectedTypes: [Int]
        /// `Image.verify(path, None)`: the hash digest (hex) and version tuple.
        var verifyResult: String
        var digest: String
        /// hashlib's SHA-256 of the whole file (hex).
        var fileSHA256: String
    }

    /// One `imgtool sign` run: extra arguments; the body, header size and version are added.
    struct SignCase: Encodable {
        var args: [String]
        var input: String
        var output: String
    }

    /// Signs every case with imgtool (one Python process) and reports dumpinfo/verify for each output.
    /// `key` names a PEM file to create with `imgtool keygen -t ecdsa-p256` first (use `-k` in args).
    static func sign(_ cases: [SignCase], keygen key: String? = nil) throws -> [Report] {
        struct Input: Encodable {
            var cases: [SignCase]
            var keygen: String?
        }
        let input = String(decoding: try JSONEncoder().encode(Input(cases: cases, keygen: key)), as: UTF8.self)
        let output = try run(script: signScript, input: input)
        return try JSONDecoder().decode([Report].self, from: Data(output.utf8))
    }

    private static let signScript = #"""
import contextlib, hashlib, io, json, re, struct, sys
from imgtool.main import imgtool
from imgtool.image import Image

def run(args):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        imgtool.main(args, standalone_mode=False)
    return buf.getvalue()

request = json.load(sys.stdin)
if request.get("keygen"):
    run(["keygen", "-k", request["keygen"], "-t", "ecdsa-p256"])
reports = []
for case in request["cases"]:
    run(["sign"] + case["args"] + [case["input"], case["output"]])
    info = run(["dumpinfo", case["output"]])
    report = {"protectedTypes": [], "unprotectedTypes": []}
    area = None
    for line in info.splitlines():
        line = line.strip()
        m = re.match(r"^(\w+):\s+(\S+)", line)
        if line.startswith("type:"):
            t = int(re.search(r"\((0x[0-9a-fA-F]+)\)", line).group(1), 16)
            report[area].append(t)
        elif m:
            key, value = m.group(1), m.group(2)
            if key == "magic" and value == "0x6908":
                area = "protectedTypes"
            elif key == "magic" and value == "0x6907":
                area = "unprotectedTypes"
            elif key == "version":
                report["version"] = value
            elif key == "hdr_size":
                report["hdrSize"] = int(value, 16)
            elif key == "protected_tlv_size":
                report["protectedTLVSize"] = int(value, 16)
            elif key == "img_size":
                report["imgSize"] = int(value, 16)
            elif key == "load_addr":
                report["loadAddr"] = int(value, 16)
    result, _, digest, _ = Image.verify(case["output"], None)
    report["verifyResult"] = str(result)
    report["digest"] = digest.hex() if digest else ""
    with open(case["output"], "rb") as f:
        raw = f.read()
    report["fileSHA256"] = hashlib.sha256(raw).hexdigest()
    # dumpinfo prints flags by name; read the field itself.
    report["flags"] = struct.unpack_from("<I", raw, 16)[0]
    reports.append(report)
json.dump(reports, sys.stdout)
"""#
}
