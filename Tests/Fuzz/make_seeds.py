#!/usr/bin/env python3
"""Builds the fuzz seed corpora in Tests/Fuzz/Corpus (the Test rigs article, "Fuzzing"); run with the test venv's Python
(Scripts/setup.sh), from the repository root:  $SMP_TEST_PYTHON Tests/Fuzz/make_seeds.py

- console, raw, response, cbor: real traffic. Requests built by the independent `smp` package go to the
  real Zephyr SMP server (native_sim_serial.exe from /work/shared/firmware or $SMP_FIRMWARE_DIR) over its
  pty; every byte it sends back is kept as a console seed (plus one with log and prompt noise around an
  answer, as a shell build prints it: this build logs elsewhere); the packets
  in it become raw seeds (back to back), response seeds (one each) and CBOR seeds (their payloads).
- image: small images signed by MCUboot's imgtool (SHA-256/384/512, padded header, protected TLVs).
- package: dfu_application.zip layouts (one image, two cores, Direct-XIP, SUIT) and their manifests,
  written with Python's zipfile (stored and deflated).
- suit: SUIT envelopes (tag 107, authentication wrapper with a SHA-256 digest, manifest) by cbor2.
The D-Bus seeds (Tests/Fuzz/Corpus/dbus) are messages captured from a private bus: see capture_dbus.sh.
"""
import base64
import hashlib
import json
import os
import select
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import cbor2
from smp import enumeration_management as smpenum
from smp import file_management as smpfs
from smp import os_management as smpos
from smp import settings_management as smpsettings
from smp import shell_management as smpshell
from smp import statistics_management as smpstat
from smp import packet as smppacket

ROOT = Path(__file__).resolve().parent / "Corpus"
FIRMWARE = Path(os.environ.get("SMP_FIRMWARE_DIR", "/work/shared/firmware"))
SERIAL_APP = FIRMWARE / "zephyr_4.4.0_smp_server_0eae053d_native_sim_serial.exe"


def write(target: str, name: str, data: bytes) -> None:
    directory = ROOT / target
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(data)


def read_for(fd: int, seconds: float) -> bytes:
    out = b""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            out += os.read(fd, 4096)
    return out


def frames_in(stream: bytes) -> list[bytes]:
    """SMP packets in a console stream (Zephyr frames: each line Base64 on its own)."""
    packets, body = [], None
    for line in stream.split(b"\n"):
        for marker in (b"\x06\x09", b"\x04\x14"):
            at = line.find(marker)
            if at >= 0:
                chunk = base64.b64decode(line[at + 2:].strip())
                body = chunk if marker == b"\x06\x09" else (body or b"") + chunk
                if body is not None and len(body) >= 2 and len(body) >= 2 + struct.unpack(">H", body[:2])[0]:
                    length = struct.unpack(">H", body[:2])[0]
                    packets.append(body[2:2 + length - 2])
                    body = None
                break
    return packets


def capture_serial() -> None:
    requests = [
        ("echo", smpos.EchoWriteRequest(d="hello fuzz")),
        ("echo-long", smpos.EchoWriteRequest(d="x" * 150)),
        ("params", smpos.MCUMgrParametersReadRequest()),
        ("info", smpos.OSApplicationInfoReadRequest(format="a")),
        ("bootloader", smpos.BootloaderInformationReadRequest()),
        ("taskstat", smpos.TaskStatisticsReadRequest()),
        ("mpstat", smpos.MemoryPoolStatisticsReadRequest()),
        ("datetime", smpos.DateTimeReadRequest()),
        ("stat-list", smpstat.ListOfGroupsRequest()),
        ("stat-read", smpstat.GroupDataRequest(name="smp_svr_stats")),
        ("stat-missing", smpstat.GroupDataRequest(name="nothing")),
        ("enum-count", smpenum.GroupCountRequest()),
        ("enum-list", smpenum.ListOfGroupsRequest()),
        ("enum-details", smpenum.GroupDetailsRequest()),
        ("settings-write", smpsettings.WriteSettingRequest(name="fuzz/value", val=b"\x01\x02\x03")),
        ("settings-read", smpsettings.ReadSettingRequest(name="fuzz/value")),
        ("settings-missing", smpsettings.ReadSettingRequest(name="no/such")),
        ("shell", smpshell.ExecuteRequest(argv=["kernel", "version"])),
        ("fs-upload", smpfs.FileUploadRequest(off=0, data=b"fuzz seed file\n", name="/lfs1/seed.txt", len=15)),
        ("fs-stat", smpfs.FileStatusRequest(name="/lfs1/seed.txt")),
        ("fs-hash", smpfs.FileHashChecksumRequest(name="/lfs1/seed.txt")),
        ("fs-hash-types", smpfs.SupportedFileHashChecksumTypesRequest()),
        ("fs-download", smpfs.FileDownloadRequest(off=0, name="/lfs1/seed.txt")),
        ("fs-missing", smpfs.FileStatusRequest(name="/lfs1/none")),
        ("fs-close", smpfs.FileCloseRequest()),
    ]
    with tempfile.TemporaryDirectory() as work:
        app = subprocess.Popen([str(SERIAL_APP)], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            line = b""
            while b"pseudotty" not in line:
                line = app.stdout.readline()
                if not line:
                    sys.exit("the firmware did not start")
            pty = line.decode().split()[-1]
            fd = os.open(pty, os.O_RDWR | os.O_NOCTTY)
            import termios, tty
            tty.setraw(fd)
            boot = read_for(fd, 1.0)
            if boot:
                write("console", "boot-output", boot)
            responses = []
            for sequence, (name, request) in enumerate(requests):
                raw = bytearray(request.BYTES)
                raw[6] = sequence
                for frame in smppacket.encode(bytes(raw), line_length=127):
                    os.write(fd, frame)
                    time.sleep(0.03)
                received = read_for(fd, 0.4)
                write("console", f"answer-{name}", received)
                packets = frames_in(received)
                for packet in packets:
                    responses.append(packet)
                    write("response", f"{name}", packet)
                    write("cbor", f"{name}", packet[8:])
                    write("raw", f"{name}", packet)
                write("raw", f"request-{name}", bytes(raw))
            write("raw", "all-answers", b"".join(responses))
            # The serial app logs to its stdout, not the pty: console noise as the shell sample prints it
            # (log line with colour escapes, prompt) around a real answer.
            echo = (ROOT / "console" / "answer-echo").read_bytes()
            write("console", "noise-around-answer",
                  b"\x1b[1;32muart:~$ \x1b[m[00:00:01.000,000] <inf> smp_sample: build time\r\n" + echo + b"uart:~$ ")
            write("console", "requests-two-frames", b"".join(b"".join(smppacket.encode(r[1].BYTES)) for r in requests[:2]))
            os.close(fd)
        finally:
            app.terminate()
            app.wait()


def imgtool(body: bytes, *options: str) -> bytes:
    with tempfile.TemporaryDirectory() as work:
        source, signed = Path(work, "in.bin"), Path(work, "out.bin")
        source.write_bytes(body)
        imgtool_bin = Path(sys.executable).with_name("imgtool")
        subprocess.run([str(imgtool_bin), "sign", "--version", "1.2.3+4", "--slot-size", "0x10000", *options, str(source), str(signed)],
                       check=True, capture_output=True)
        return signed.read_bytes()


def images() -> dict[str, bytes]:
    body = bytes((i * 7 + 3) & 0xFF for i in range(200))
    made = {
        "sha256": imgtool(body, "--header-size", "32", "--pad-header", "--align", "4"),
        "sha384": imgtool(body, "--header-size", "32", "--pad-header", "--sha", "384"),
        "sha512": imgtool(body, "--header-size", "32", "--pad-header", "--sha", "512"),
        "header64-protected": imgtool(body, "--header-size", "64", "--pad-header", "--custom-tlv", "0xa0", "0x0102",
                                      "--dependencies", "(1,2.0.0+0)"),
        "empty-body": imgtool(b"", "--header-size", "32", "--pad-header"),
    }
    for name, data in made.items():
        write("image", name, data)
    # A legacy (magic 0x96f3b83c) image: header, body, a SHA-256 TLV of type 0x01.
    header = struct.pack("<IIHHIIBBHII", 0x96F3B83C, 0, 32, 0, len(body), 0, 1, 0, 0, 0, 0)
    digest = hashlib.sha256(header + body).digest()
    write("image", "legacy", header + body + struct.pack("<BBH", 0x01, 0, 32) + digest)
    return made


def suit_envelope(sequence: int, payload: bytes) -> bytes:
    manifest = cbor2.dumps({1: 1, 2: sequence, 3: b"\xa1\x01\x02"})
    digest = cbor2.dumps([-16, hashlib.sha256(manifest).digest()])
    wrapper = cbor2.dumps([digest, b"signature-placeholder"])
    return cbor2.dumps(cbor2.CBORTag(107, {2: wrapper, 3: manifest, 17: payload}))


def packages(made: dict[str, bytes]) -> None:
    def zipped(name: str, files: dict[str, bytes], method=zipfile.ZIP_DEFLATED) -> None:
        path = Path(tempfile.mkdtemp()) / "p.zip"
        with zipfile.ZipFile(path, "w", compression=method) as archive:
            for entry, data in files.items():
                archive.writestr(entry, data)
        write("package", name, path.read_bytes())
        path.unlink()

    def image_entry(file: str, image: int, slot=None, kind="application") -> dict:
        entry = {"file": file, "image_index": str(image), "type": kind, "load_address": "0x0",
                 "board": "nrf5340dk", "soc": "nrf5340", "size": 0, "version_MCUBOOT": "1.2.3+4"}
        if slot is not None:
            entry["slot_index_primary"] = str(slot)
            entry["slot"] = str(slot)
        return entry

    one = {"format-version": 1, "time": 1700000000, "name": "one", "files": [image_entry("app.bin", 0)]}
    zipped("one-image", {"manifest.json": json.dumps(one).encode(), "app.bin": made["sha256"]})
    zipped("one-image-stored", {"manifest.json": json.dumps(one).encode(), "app.bin": made["sha256"]}, zipfile.ZIP_STORED)
    two = {"format-version": 1, "time": 1700000000, "name": "two cores",
           "files": [image_entry("app.bin", 0), image_entry("net.bin", 1)]}
    zipped("two-cores", {"manifest.json": json.dumps(two).encode(), "app.bin": made["sha256"], "net.bin": made["sha512"]})
    xip = {"format-version": 1, "time": 1700000000, "name": "xip",
           "files": [image_entry("slot0.bin", 0, 0), image_entry("slot1.bin", 0, 1)]}
    zipped("direct-xip", {"manifest.json": json.dumps(xip).encode(), "slot0.bin": made["sha256"],
                          "slot1.bin": made["sha384"]})
    envelope = suit_envelope(3, b"")
    suit = {"format-version": 1, "time": 1700000000, "name": "suit",
            "files": [{"file": "root.suit", "type": "suit-envelope", "version": 1},
                      {"file": "app.bin", "type": "cache", "partition": 2}]}
    zipped("suit", {"manifest.json": json.dumps(suit).encode(), "root.suit": envelope, "app.bin": b"cache data"})
    for name, manifest in (("one", one), ("two", two), ("xip", xip), ("suit", suit)):
        write("package", f"manifest-{name}.json", json.dumps(manifest, indent=1).encode())


def suits() -> None:
    write("suit", "envelope", suit_envelope(1, b""))
    write("suit", "envelope-integrated-payload", suit_envelope(0x12345678, bytes(range(64))))


if __name__ == "__main__":
    capture_serial()
    made = images()
    packages(made)
    suits()
    for target in sorted(p.name for p in ROOT.iterdir()):
        files = list((ROOT / target).iterdir())
        print(f"{target}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")
