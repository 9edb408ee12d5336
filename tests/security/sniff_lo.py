#!/usr/bin/env python3
"""Counts, in everything that crosses the loopback interface until SIGTERM, the socket network's
clear message headers: the 4 bytes "TKCS" (the low half of its magic) not followed by "TFEW"
(the rest of the magic, as sent in the clear opening of every socket). Prints the count and the
bytes seen. Needs root (a packet socket)."""
import signal
import socket
import sys

ETH_P_ALL = 0x0003
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
sock.bind(("lo", 0))
sock.settimeout(0.2)
headers = seen = 0
stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while not stop:
    try:
        frame = sock.recv(262144)
    except socket.timeout:
        continue
    seen += len(frame)
    headers += frame.count(b"TKCS") - frame.count(b"TKCSTFEW")
print(f"headers {headers} bytes {seen}", flush=True)
