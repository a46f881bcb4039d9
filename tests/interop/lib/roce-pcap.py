#!/usr/bin/env python3
"""Summarise the RoCE v2 frames of a pcap (Ethernet, IPv4/IPv6, UDP 4791): per direction, the
number of frames, the BTH opcodes, and whether each frame's ICRC is right.

usage: roce-pcap.py FILE.pcap [--host A.B.C.D]
Prints one line per direction ("SRC->DST: N frames, ICRC ok N, bad M, truncated K; opcodes ...")
and exits 1 if any complete frame has a wrong ICRC.

The ICRC (RoCE v2, IBTA annex A17): CRC-32 over 8 bytes of 0xff (the masked LRH), the IP header
with TOS/TTL/checksum (IPv6: traffic class, flow label, hop limit) set to ones, the UDP header
with its checksum set to ones, the BTH with its reserved byte 4 set to ones, then the rest of
the packet up to the ICRC; stored little-endian in the last 4 bytes.
"""
import collections
import socket
import struct
import sys
import zlib

OPCODES = {0x00: "SEND_FIRST", 0x01: "SEND_MIDDLE", 0x02: "SEND_LAST", 0x03: "SEND_LAST_IMM",
           0x04: "SEND_ONLY", 0x05: "SEND_ONLY_IMM", 0x06: "WRITE_FIRST", 0x07: "WRITE_MIDDLE",
           0x08: "WRITE_LAST", 0x09: "WRITE_LAST_IMM", 0x0a: "WRITE_ONLY", 0x0b: "WRITE_ONLY_IMM",
           0x0c: "READ_REQ", 0x0d: "READ_RESP_FIRST", 0x0e: "READ_RESP_MIDDLE",
           0x0f: "READ_RESP_LAST", 0x10: "READ_RESP_ONLY", 0x11: "ACK", 0x12: "ATOMIC_ACK",
           0x13: "CMP_SWAP", 0x14: "FETCH_ADD", 0x16: "SEND_LAST_INV", 0x17: "SEND_ONLY_INV",
           # UD (the CM's MADs on QP1 are UD SEND ONLY)
           0x64: "UD_SEND_ONLY", 0x65: "UD_SEND_ONLY_IMM"}


def frames(path):
    data = open(path, "rb").read()
    if len(data) < 24:
        return
    magic = struct.unpack("<I", data[:4])[0]
    e = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    if struct.unpack(e + "I", data[20:24])[0] != 1:
        raise SystemExit(f"{path}: not an Ethernet capture")
    off = 24
    while off + 16 <= len(data):
        _, _, incl, orig = struct.unpack(e + "IIII", data[off:off + 16])
        yield data[off + 16:off + 16 + incl], orig
        off += 16 + incl


def parse(fr):
    """Returns (src, dst, opcode, ok) with ok None when the frame is truncated, or None."""
    et, l3 = struct.unpack(">H", fr[12:14])[0], 14
    if et == 0x8100:
        et, l3 = struct.unpack(">H", fr[16:18])[0], 18
    if et == 0x0800:
        ihl = (fr[l3] & 0x0F) * 4
        ip = bytearray(fr[l3:l3 + ihl])
        end = l3 + struct.unpack(">H", ip[2:4])[0]
        src, dst = socket.inet_ntoa(bytes(ip[12:16])), socket.inet_ntoa(bytes(ip[16:20]))
        ip[1], ip[8], ip[10:12] = 0xFF, 0xFF, b"\xff\xff"
        l4 = l3 + ihl
    elif et == 0x86DD:
        ip = bytearray(fr[l3:l3 + 40])
        src = socket.inet_ntop(socket.AF_INET6, bytes(ip[8:24]))
        dst = socket.inet_ntop(socket.AF_INET6, bytes(ip[24:40]))
        l4 = l3 + 40
        end = l4 + struct.unpack(">H", ip[4:6])[0]
        ip[0] |= 0x0F
        ip[1:4] = b"\xff\xff\xff"
        ip[7] = 0xFF
    else:
        return None
    if len(fr) < l4 + 20 or struct.unpack(">H", fr[l4 + 2:l4 + 4])[0] != 4791:
        return None
    op = fr[l4 + 8]
    if len(fr) < end:
        return src, dst, op, None
    udp = bytearray(fr[l4:l4 + 8])
    udp[6:8] = b"\xff\xff"
    bth = bytearray(fr[l4 + 8:l4 + 20])
    bth[4] = 0xFF
    crc = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth) + fr[l4 + 20:end - 4])
    return src, dst, op, crc.to_bytes(4, "little") == fr[end - 4:end]


def main():
    path = sys.argv[1]
    stats = collections.OrderedDict()
    for fr, _ in frames(path):
        p = parse(fr)
        if p is None:
            continue
        src, dst, op, ok = p
        s = stats.setdefault((src, dst), {"n": 0, "ok": 0, "bad": 0, "trunc": 0, "ops": collections.Counter()})
        s["n"] += 1
        s["ops"][OPCODES.get(op, f"0x{op:02x}")] += 1
        s["ok" if ok else "trunc" if ok is None else "bad"] += 1
    bad = 0
    for (src, dst), s in stats.items():
        bad += s["bad"]
        ops = " ".join(f"{k}x{v}" for k, v in s["ops"].most_common())
        print(f"{src}->{dst}: {s['n']} frames, ICRC ok {s['ok']}, bad {s['bad']}, truncated {s['trunc']}; {ops}")
    if not stats:
        print(f"{path}: no RoCE v2 frame")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
