"""Unit tests of smp_labgrid: the URI mapping (plain functions and the driver bound to labgrid
resources) and how a failing smp is reported. Run: python -m pytest Integrations/labgrid/tests."""

import os
import stat
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import smp_labgrid  # noqa: E402
from smp_labgrid import SMPError, add_options, network_uri, serial_uri  # noqa: E402


def test_serial_uri():
    assert serial_uri("/dev/ttyACM0", 115200) == "serial:/dev/ttyACM0?baud=115200"
    assert serial_uri("/dev/serial/by-id/usb-SEGGER_J-Link_001050234567-if02", 1000000) == \
        "serial:/dev/serial/by-id/usb-SEGGER_J-Link_001050234567-if02?baud=1000000"
    assert serial_uri("/dev/ttyUSB1", None) == "serial:/dev/ttyUSB1"
    assert serial_uri("/dev/ttyACM0", 115200, {"framing": "raw", "line": 256}) == \
        "serial:/dev/ttyACM0?baud=115200&framing=raw&line=256"
    assert serial_uri("/dev/ttyACM0", None, "flow=rtscts") == "serial:/dev/ttyACM0?flow=rtscts"
    with pytest.raises(ValueError, match="no path"):
        serial_uri(None, 115200)


def test_network_uri():
    assert network_uri("rfc2217", "rig3.lab", 4001, 115200) == "rfc2217://rig3.lab:4001?baud=115200"
    assert network_uri("raw", "192.0.2.7", 7002, 115200) == "tcp://192.0.2.7:7002"
    assert network_uri("raw", "::1", 7002) == "tcp://[::1]:7002"
    assert network_uri("rfc2217", "2001:db8::7", 4001, 1000000) == "rfc2217://[2001:db8::7]:4001?baud=1000000"
    assert network_uri("rfc2217", "h", 1, 9600, {"framing": "raw"}) == "rfc2217://h:1?baud=9600&framing=raw"
    assert network_uri("raw", "h", 1, 9600, {"framing": "raw"}) == "tcp://h:1?framing=raw"
    with pytest.raises(ValueError, match="unknown NetworkSerialPort protocol 'telnet'"):
        network_uri("telnet", "h", 1)
    with pytest.raises(ValueError, match="is the place acquired"):
        network_uri("rfc2217", "h", None)


def test_add_options():
    assert add_options("tcp://h:1", None) == "tcp://h:1"
    assert add_options("tcp://h:1", {}) == "tcp://h:1"
    assert add_options("tcp://h:1", "?window=2") == "tcp://h:1?window=2"
    assert add_options("serial:/dev/x?baud=1", {"flow": "rtscts", "v1": True}) == "serial:/dev/x?baud=1&flow=rtscts&v1"
    assert add_options("serial:/dev/x", {"name": "a b&c"}) == "serial:/dev/x?name=a%20b%26c"


labgrid = pytest.importorskip("labgrid")


def make_target(resource_cls, resource_args, driver_args=None, smp="/bin/true"):
    from labgrid import Target, target_factory
    target = Target("board")
    target_factory.make_resource(target, resource_cls, "port", resource_args)
    target_factory.make_driver(target, "SMPDriver", None, dict({"smp": smp}, **(driver_args or {})))
    return target


def test_driver_maps_local_serial_port():
    target = make_target("RawSerialPort", {"port": "/dev/ttyACM3", "speed": 1000000})
    driver = target.get_driver("SMPDriver")
    assert driver.device_uri() == "serial:/dev/ttyACM3?baud=1000000"
    target.cleanup()


def test_driver_maps_network_serial_ports():
    target = make_target("NetworkSerialPort", {"host": "rig2.lab", "port": 51234, "speed": 115200})
    assert target.get_driver("SMPDriver").device_uri() == "rfc2217://rig2.lab:51234?baud=115200"
    target.cleanup()
    target = make_target("NetworkSerialPort", {"host": "192.0.2.9", "port": 7002, "speed": 115200, "protocol": "raw"},
                         {"uri_options": {"framing": "raw"}})
    assert target.get_driver("SMPDriver").device_uri() == "tcp://192.0.2.9:7002?framing=raw"
    target.cleanup()


def test_driver_names_a_missing_smp():
    target = make_target("RawSerialPort", {"port": "/dev/ttyACM0"}, smp="/nonexistent/smp")
    with pytest.raises(SMPError, match="is not found; install it"):
        target.get_driver("SMPDriver")
    target.cleanup()


def fake_smp(tmp_path, body):
    path = tmp_path / "smp"
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_driver_runs_smp_with_the_uri_and_parses_json(tmp_path):
    smp = fake_smp(tmp_path, """\
        echo "$@" > "$(dirname "$0")/args"
        echo '{"r":"hello"}'
        """)
    target = make_target("RawSerialPort", {"port": "/dev/ttyACM0"}, {"timeout": 3}, smp=smp)
    driver = target.get_driver("SMPDriver")
    assert driver.echo("hello") == "hello"
    assert (tmp_path / "args").read_text().split() == \
        ["--device", "serial:/dev/ttyACM0?baud=115200", "--json", "--timeout", "3", "os", "echo", "hello"]
    target.cleanup()


def test_driver_raises_smps_error_message(tmp_path):
    smp = fake_smp(tmp_path, """\
        echo '{"error":{"kind":"device","message":"statistics read failed: INVALID_STAT_NAME (3)","exit_code":1,"group":2,"group_rc":3,"name":"INVALID_STAT_NAME"}}'
        exit 1
        """)
    target = make_target("RawSerialPort", {"port": "/dev/ttyACM0"}, smp=smp)
    driver = target.get_driver("SMPDriver")
    with pytest.raises(SMPError) as caught:
        driver.run("stat", "read", "nope")
    assert caught.value.exit_code == 1
    assert caught.value.kind == "device"
    assert caught.value.error["name"] == "INVALID_STAT_NAME"
    assert "statistics read failed: INVALID_STAT_NAME (3)" in str(caught.value)
    target.cleanup()


def test_driver_reports_a_failed_upgrade(tmp_path):
    smp = fake_smp(tmp_path, """\
        echo '{"event":"state","from":"validate","to":"failed"}'
        echo '{"event":"result","status":"failed","state":"validate","kind":"transport","message":"cannot open serial port"}'
        echo '{"error":{"kind":"transport","message":"cannot open serial port","exit_code":69}}'
        exit 69
        """)
    package = tmp_path / "app.bin"
    package.write_bytes(b"\0" * 64)
    target = make_target("RawSerialPort", {"port": "/dev/ttyACM0"}, smp=smp)
    driver = target.get_driver("SMPDriver")
    with pytest.raises(SMPError) as caught:
        driver.upgrade(package)
    assert caught.value.exit_code == 69 and caught.value.kind == "transport"
    assert caught.value.result["state"] == "validate"
    with pytest.raises(ValueError, match="unknown upgrade mode"):
        driver.upgrade(package, mode="swap")
    target.cleanup()


def test_driver_stops_smp_at_its_deadline(tmp_path):
    smp = fake_smp(tmp_path, "sleep 30\n")
    target = make_target("RawSerialPort", {"port": "/dev/ttyACM0"}, {"deadline": 0.5}, smp=smp)
    driver = target.get_driver("SMPDriver")
    with pytest.raises(SMPError, match="did not finish within 0.5 s") as caught:
        driver.params()
    assert caught.value.exit_code is None
    target.cleanup()
