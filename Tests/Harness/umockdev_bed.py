#!/usr/bin/python3
"""A umockdev test bed with fake USB serial boards, for the udev discovery tests.

Usage: umockdev_bed.py SPEC.json   (prints a JSON report on stdout)

Runs under Debian's /usr/bin/python3 with gir1.2-umockdev-1.0 and python3-gi. It re-executes itself
under libumockdev-preload.so.0 (umockdev sends uevents only from a preloaded process), builds the fake
devices, runs the steps of the spec (programs in the foreground or background, unplugging and
re-plugging boards), and relays the bytes of a fake tty to a simulator's pty when asked, so that the
real `smp` binary talks to `smp-sim` through the emulated /dev/ttyACM node.

Spec (JSON):
  udev_db      true: the tty carries udevd's properties (ID_VENDOR_ID, ID_SERIAL_SHORT, DEVLINKS, ...);
               false: only the kernel's (discovery must fall back to sysfs attributes)
  by_id_links  true: create /dev/serial/by-id links in the bed
  devices      [{id, vendor, product, serial?, manufacturer?, product_name?, driver ("cdc_acm" |
                 "ftdi_sio" | ...), port ("1-1"), ttys: [{name, interface}], relay_to? (a pty path)}]
  steps        [{run: [argv], name, timeout?} | {spawn: [argv], name} |
                {wait_for: {name, text, count?, timeout?}} | {stop: name} | {sleep: seconds} |
                {unplug: id} | {plug: id, ttys?: [names]}]
  on_reset     {device: id, ttys: [new names], gone: seconds, stale?: seconds}: when the relay sees an
               SMP OS reset request, unplug the board after its answer and plug it back with the new tty
               names; `stale` keeps the tty in sysfs that long after its remove uevent (the kernel sends
               the event before it deletes the device: a rescan in between still finds the old port)
Report: {"results": {name: {status, stdout, stderr, timed_out}}, "log": [...], "error": null|text}
"""
import base64
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import tty

PRELOAD = "libumockdev-preload.so.0"

if PRELOAD not in os.environ.get("LD_PRELOAD", ""):
    env = dict(os.environ)
    env["LD_PRELOAD"] = (PRELOAD + " " + env.get("LD_PRELOAD", "")).strip()
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

import gi  # noqa: E402

gi.require_version("UMockdev", "1.0")
from gi.repository import UMockdev  # noqa: E402

LOG = []


def log(text):
    LOG.append("%.3f %s" % (time.monotonic(), text))


TTY_MAJOR = {"cdc_acm": 166}


class Bed:
    def __init__(self, spec):
        self.spec = spec
        self.testbed = UMockdev.Testbed.new()
        self.root = self.testbed.get_root_dir()
        self.devices = {d["id"]: d for d in spec.get("devices", [])}
        self.present = {}  # id -> list of tty names
        self.slaves = []  # slave fds kept open (a pty master reads EIO otherwise)
        self.lock = threading.Lock()
        self.relay = None
        self.minor = 0

    # Device descriptions in umockdev's record format: the tty, its parents, then the USB device.
    def describe(self, device, ttys):
        udev_db = self.spec.get("udev_db", True)
        driver = device.get("driver", "cdc_acm")
        port = device.get("port", "1-1")
        usb_path = "/devices/pci0000:00/0000:00:14.0/usb1/%s" % port
        blocks = []
        serial = device.get("serial")
        for tty_spec, name in ttys:
            interface = int(tty_spec.get("interface", 0))
            iface_path = "%s/%s:1.%d" % (usb_path, port, interface)
            major = TTY_MAJOR.get(driver, 188)
            self.minor += 1
            if driver == "cdc_acm":
                tty_path = "%s/tty/%s" % (iface_path, name)
            else:
                tty_path = "%s/%s/tty/%s" % (iface_path, name, name)
            lines = ["P: %s" % tty_path, "N: %s" % name, "E: DEVNAME=/dev/%s" % name, "E: SUBSYSTEM=tty",
                     "E: MAJOR=%d" % major, "E: MINOR=%d" % self.minor]
            if udev_db:
                model = (device.get("product_name") or "").replace(" ", "_")
                vendor = (device.get("manufacturer") or "").replace(" ", "_")
                by_id = "/dev/serial/by-id/usb-%s_%s_%s-if%02d" % (vendor, model, serial or "", interface)
                lines += ["E: ID_VENDOR_ID=%s" % device["vendor"], "E: ID_MODEL_ID=%s" % device["product"],
                          "E: ID_VENDOR=%s" % vendor, "E: ID_MODEL=%s" % model,
                          "E: ID_USB_INTERFACE_NUM=%02d" % interface, "E: ID_USB_DRIVER=%s" % driver,
                          "E: DEVLINKS=%s /dev/serial/by-path/pci-0000:00:14.0-usb-0:%s:1.%d" % (by_id, port, interface)]
                if serial:
                    lines.append("E: ID_SERIAL_SHORT=%s" % serial)
            lines.append("A: dev=%d:%d" % (major, self.minor))
            blocks.append("\n".join(lines))
            if driver != "cdc_acm":
                blocks.append("\n".join(["P: %s/%s" % (iface_path, name), "E: SUBSYSTEM=usb-serial",
                                         "L: driver=../../../../../../bus/usb-serial/drivers/%s" % driver]))
            iface = ["P: %s" % iface_path, "E: SUBSYSTEM=usb", "E: DEVTYPE=usb_interface",
                     "A: bInterfaceNumber=%02x" % interface, "A: bInterfaceClass=%s" % ("02" if driver == "cdc_acm" else "ff")]
            if driver == "cdc_acm":
                iface.append("L: driver=../../../../../../bus/usb/drivers/cdc_acm")
            blocks.append("\n".join(iface))
        attrs = ["P: %s" % usb_path, "N: bus/usb/001/%03d" % (10 + len(self.present)), "E: SUBSYSTEM=usb",
                 "E: DEVTYPE=usb_device", "A: idVendor=%s" % device["vendor"], "A: idProduct=%s" % device["product"],
                 "A: busnum=1", "A: devnum=%d" % (10 + len(self.present))]
        if serial:
            attrs.append("A: serial=%s" % serial)
        if device.get("manufacturer"):
            attrs.append("A: manufacturer=%s" % device["manufacturer"])
        if device.get("product_name"):
            attrs.append("A: product=%s" % device["product_name"])
        blocks.append("\n".join(attrs))
        return "\n\n".join(blocks) + "\n", usb_path

    def plug(self, device_id, names=None):
        device = self.devices[device_id]
        tty_specs = device.get("ttys", [{"name": "ttyACM0", "interface": 0}])
        names = names or [t["name"] for t in tty_specs]
        description, usb_path = self.describe(device, list(zip(tty_specs, names)))
        self.testbed.add_from_string(description)
        device["_usb_path"] = "/sys" + usb_path
        device["_tty_paths"] = [line[3:] for line in description.splitlines() if line.startswith("P: ") and "/tty/" in line]
        self.present[device_id] = names
        if self.spec.get("by_id_links", False):
            by_id = os.path.join(self.root, "dev/serial/by-id")
            os.makedirs(by_id, exist_ok=True)
            for tty_spec, name in zip(tty_specs, names):
                link = os.path.join(by_id, "usb-%s_%s_%s-if%02d" % (
                    (device.get("manufacturer") or "").replace(" ", "_"),
                    (device.get("product_name") or "").replace(" ", "_"),
                    device.get("serial") or "", int(tty_spec.get("interface", 0))))
                if os.path.lexists(link):
                    os.unlink(link)
                os.symlink("../../" + name, link)
        for name in names:
            # Keep a slave open and in raw mode, so the master never reads EIO and nothing echoes.
            slave = os.readlink(os.path.join(self.root, "dev", name))
            fd = os.open(slave, os.O_RDWR | os.O_NOCTTY)
            tty.setraw(fd)
            self.slaves.append(fd)
        log("plugged %s as %s" % (device_id, ",".join(names)))
        if device.get("relay_to"):
            master = self.testbed.get_dev_fd("/dev/" + names[0])
            self.start_relay(device_id, master, device["relay_to"])

    def unplug(self, device_id, stale=0):
        device = self.devices[device_id]
        if self.relay and self.relay.device_id == device_id:
            self.relay.detach()
        for tty_path in device.get("_tty_paths", []):
            self.testbed.uevent("/sys" + tty_path, "remove")
        if stale:
            log("remove uevents sent; sysfs keeps %s for %.1f s" % (device_id, stale))
            time.sleep(stale)
        self.testbed.remove_device(device["_usb_path"])
        self.remove_dangling_links()
        for name in self.present.pop(device_id, []):
            for link_dir in ("dev/serial/by-id",):
                directory = os.path.join(self.root, link_dir)
                for entry in os.listdir(directory) if os.path.isdir(directory) else []:
                    if os.readlink(os.path.join(directory, entry)) == "../../" + name:
                        os.unlink(os.path.join(directory, entry))
        log("unplugged %s" % device_id)

    def remove_dangling_links(self):
        """remove_device leaves /sys/bus/*/devices and /sys/class/* links behind; a re-plug needs them gone."""
        sys_dir = os.path.join(self.root, "sys")
        for top in ("bus", "class"):
            for directory, _, files in os.walk(os.path.join(sys_dir, top)):
                for name in files:
                    path = os.path.join(directory, name)
                    if os.path.islink(path) and not os.path.exists(path):
                        os.unlink(path)

    def start_relay(self, device_id, master, sim_path):
        if self.relay is None:
            sim = os.open(sim_path, os.O_RDWR | os.O_NOCTTY)
            tty.setraw(sim)
            self.relay = Relay(self, sim)
            threading.Thread(target=self.relay.run, daemon=True).start()
        self.relay.attach(device_id, master)


class Relay:
    """Copies bytes between the fake tty's pty master and the simulator's pty; watches for SMP resets."""

    def __init__(self, bed, sim):
        self.bed = bed
        self.sim = sim
        self.master = None
        self.device_id = None
        self.lock = threading.Lock()
        self.line = b""
        self.reset_at = None

    def attach(self, device_id, master):
        with self.lock:
            self.master = master
            self.device_id = device_id
        log("relay attached to %s (fd %d)" % (device_id, master))

    def detach(self):
        with self.lock:
            self.master = None
        log("relay detached")

    def run(self):
        while True:
            with self.lock:
                master = self.master
            fds = [self.sim] + ([master] if master is not None else [])
            try:
                readable, _, _ = select.select(fds, [], [], 0.05)
            except (OSError, ValueError):
                time.sleep(0.05)
                continue
            for fd in readable:
                try:
                    data = os.read(fd, 4096)
                except OSError:
                    continue
                if fd == self.sim:
                    if master is not None:
                        try:
                            os.write(master, data)
                        except OSError:
                            pass
                else:
                    self.watch_requests(data)
                    os.write(self.sim, data)
            if self.reset_at is not None and time.monotonic() >= self.reset_at:
                self.reset_at = None
                threading.Thread(target=self.bed.replug_after_reset, daemon=True).start()

    def watch_requests(self, data):
        """Finds OS reset requests (op 2, group 0, id 5) in the console framing."""
        self.line += data
        while b"\n" in self.line:
            line, self.line = self.line.split(b"\n", 1)
            start = line.find(b"\x06\x09")
            if start < 0:
                continue
            try:
                raw = base64.b64decode(line[start + 2:])
            except ValueError:
                continue
            packet = raw[2:]
            if len(packet) >= 8 and packet[0] & 0x07 == 2 and packet[4:6] == b"\x00\x00" and packet[7] == 5:
                log("relay saw a reset request")
                if self.bed.spec.get("on_reset"):
                    self.reset_at = time.monotonic() + 0.3


def replug_after_reset(self):
    plan = self.spec["on_reset"]
    self.unplug(plan["device"], plan.get("stale", 0))
    time.sleep(plan.get("gone", 0.3))
    self.plug(plan["device"], plan.get("ttys"))


Bed.replug_after_reset = replug_after_reset


class Program:
    def __init__(self, argv, env):
        self.argv = argv
        self.process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        stdin=subprocess.DEVNULL)
        self.stdout = b""
        self.stderr = b""
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.pump, args=(self.process.stdout, "stdout"), daemon=True),
                        threading.Thread(target=self.pump, args=(self.process.stderr, "stderr"), daemon=True)]
        for thread in self.threads:
            thread.start()
        self.timed_out = False

    def pump(self, stream, which):
        for chunk in iter(lambda: stream.read1(4096), b""):
            with self.lock:
                setattr(self, which, getattr(self, which) + chunk)

    def text(self):
        with self.lock:
            return self.stdout.decode(errors="replace")

    def finish(self, timeout):
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.timed_out = True
            self.process.kill()
            self.process.wait()
        for thread in self.threads:
            thread.join(2)
        return self.result()

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.finish(5)

    def result(self):
        with self.lock:
            return {"status": self.process.returncode, "stdout": self.stdout.decode(errors="replace"),
                    "stderr": self.stderr.decode(errors="replace"), "timed_out": self.timed_out}


def main():
    spec = json.load(open(sys.argv[1]))
    report = {"results": {}, "log": LOG, "error": None}
    bed = Bed(spec)
    programs = {}
    try:
        for device in spec.get("devices", []):
            if device.get("plugged", True):
                bed.plug(device["id"])
        env = dict(os.environ, UMOCKDEV_DIR=bed.root)
        for step in spec.get("steps", []):
            if "run" in step:
                log("run %s" % " ".join(step["run"]))
                report["results"][step["name"]] = Program(step["run"], env).finish(step.get("timeout", 60))
            elif "spawn" in step:
                log("spawn %s" % " ".join(step["spawn"]))
                programs[step["name"]] = Program(step["spawn"], env)
            elif "wait_for" in step:
                w = step["wait_for"]
                deadline = time.monotonic() + w.get("timeout", 20)
                while programs[w["name"]].text().count(w["text"]) < w.get("count", 1):
                    if time.monotonic() > deadline:
                        raise RuntimeError("%s did not print %r %d times within %ss; stdout: %r" % (
                            w["name"], w["text"], w.get("count", 1), w.get("timeout", 20), programs[w["name"]].text()))
                    time.sleep(0.05)
                log("saw %r from %s" % (w["text"], w["name"]))
            elif "stop" in step:
                report["results"][step["stop"]] = programs.pop(step["stop"]).stop()
            elif "sleep" in step:
                time.sleep(step["sleep"])
            elif "unplug" in step:
                bed.unplug(step["unplug"])
            elif "plug" in step:
                bed.plug(step["plug"], step.get("ttys"))
            else:
                raise RuntimeError("unknown step %r" % step)
    except Exception as error:  # reported to the Swift test, which fails with it
        report["error"] = "%s: %s" % (type(error).__name__, error)
    finally:
        for name, program in programs.items():
            report["results"][name] = program.stop()
    sys.stdout.write(json.dumps(report))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
