#!/usr/bin/env python3
"""An RFC 2217 server built on pyserial's own server side (serial.rfc2217.PortManager), serving one
serial port (e.g. smp-sim's pty) on a free loopback TCP port: an implementation written by others for
smp's rfc2217:// client to talk to.

Usage: rfc2217_server.py PORT_PATH
Prints "listening TCP_PORT" once ready, then after each client disconnects "client baud N" (the baud
rate the client's SET-BAUDRATE left on the port). One client at a time; runs until killed.
"""
import socket
import sys
import threading

import serial
import serial.rfc2217


class PtySerial(serial.Serial):
    """A pty has no modem control lines (TIOCMGET/TIOCMBIS fail with ENOTTY): read them as off and
    ignore DTR/RTS changes, as a port with `local` modem handling does. The rest is pyserial's own."""

    @property
    def cts(self):
        return False

    @property
    def dsr(self):
        return False

    @property
    def ri(self):
        return False

    @property
    def cd(self):
        return False

    def _update_dtr_state(self):
        pass

    def _update_rts_state(self):
        pass


class Connection:
    """What PortManager writes to: the client socket, shared with the reader thread."""

    def __init__(self, sock):
        self.sock = sock
        self.lock = threading.Lock()

    def write(self, data):
        with self.lock:
            self.sock.sendall(data)


def serve_client(port, sock):
    connection = Connection(sock)
    manager = serial.rfc2217.PortManager(port, connection)
    done = threading.Event()

    def device_to_client():
        try:
            while not done.is_set():
                data = port.read(port.in_waiting or 1)
                if data:
                    connection.write(b"".join(manager.escape(data)))
        except OSError:
            pass

    reader = threading.Thread(target=device_to_client, daemon=True)
    reader.start()
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                break
            out = b"".join(manager.filter(data))
            if out:
                port.write(out)
    except OSError:
        pass
    done.set()
    reader.join(2)
    sock.close()


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 64
    port = PtySerial()
    port.port = sys.argv[1]
    port.baudrate = 9600
    port.timeout = 0.05
    port.open()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    print("listening", listener.getsockname()[1], flush=True)
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        serve_client(port, sock)
        print("client baud", port.baudrate, flush=True)


if __name__ == "__main__":
    sys.exit(main())
