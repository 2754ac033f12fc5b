"""hs_frames.py -- the hostile frames of testbed/hostile/hostile.py, built with scapy.

Every frame here is aimed at a live wharf node on a TAP. Each malformed variant carries a
"poison" payload where one can: an RST at the live connection's exact next sequence, or
data at that sequence with a valid ACK. A layer that wrongly accepted the frame would then
reset the live connection or corrupt its byte stream, which the echo check sees; a layer
that drops it counts the drop under the reason named next to the variant.

Called by: hostile.py phases -> Builder.* -> bytes for hs_lib.Raw.send.
"""
import socket
import struct

from scapy.all import ARP, ICMP, IP, TCP, UDP, Ether, Raw

JUNK = b"\xa5" * 64   # bytes that must never show up in the echoed stream


def inet_sum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return s


def tcp_cksum(src, dst, seg):
    """The value to store in a TCP checksum field (field zeroed in seg)."""
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(seg))
    return (~inet_sum(pseudo + seg)) & 0xffff


def fix_word(src, dst, seg, pos):
    """seg with the 16-bit word at pos chosen so the whole TCP checksum verifies (used for
    segments too short to hold the checksum field)."""
    b = bytearray(seg)
    b[pos:pos + 2] = b"\0\0"
    b[pos:pos + 2] = struct.pack("!H", tcp_cksum(src, dst, bytes(b)))
    return bytes(b)


class Builder:
    """Frames from the Linux side of the TAP to the wharf node."""

    def __init__(self, lmac, wmac, lnx, wh, port):
        self.lmac, self.wmac, self.lnx, self.wh, self.port = lmac, wmac, lnx, wh, port

    def eth(self, **kw):
        return Ether(src=self.lmac, dst=kw.pop("dst", self.wmac), **kw)

    def ip(self, **kw):
        kw.setdefault("src", self.lnx)
        kw.setdefault("dst", self.wh)
        kw.setdefault("flags", "DF")
        return IP(**kw)

    def tcp(self, sport, seq, ack, flags, payload=b"", options=None, ip_kw=None, **kw):
        """A well-formed segment (scapy fills lengths and checksums) as bytes."""
        t = TCP(sport=sport, dport=kw.pop("dport", self.port), seq=seq, ack=ack, flags=flags,
                window=kw.pop("window", 65535), options=options or [], **kw)
        return bytes(self.eth() / self.ip(**(ip_kw or {})) / t / Raw(payload))

    def tcp_raw(self, seg, ip_kw=None):
        """Hand-made TCP bytes (checksum as given) in a correct IPv4 packet."""
        return bytes(self.eth() / self.ip(proto=6, **(ip_kw or {})) / Raw(seg))

    def seg_bytes(self, sport, seq, ack, flags, doff, opts=b"", payload=b"", good_sum=True):
        """TCP header bytes with a data offset of our choosing (may lie), then payload."""
        hdr = struct.pack("!HHIIBBHHH", sport, self.port, seq, ack, (doff & 0xf) << 4, flags,
                          65535, 0, 0) + opts
        seg = hdr + payload
        ck = tcp_cksum(self.lnx, self.wh, seg)
        if not good_sum:
            ck ^= 0x5555
        return seg[:16] + struct.pack("!H", ck) + seg[18:]


F_FIN, F_SYN, F_RST, F_PSH, F_ACK, F_URG = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20


def malformed(b, lport, rcv_nxt, snd_nxt, subnet_other):
    """(name, counter that must count it, frame) for every malformed variant, aimed at the
    live tuple (lport -> b.port) whose next sequence is rcv_nxt and next ACK snd_nxt."""
    rst = b.tcp(lport, rcv_nxt, snd_nxt, "RA")
    rst_tcp = bytes(TCP(sport=lport, dport=b.port, seq=rcv_nxt, ack=snd_nxt, flags="RA"))
    v = []
    # ---- Ethernet
    v.append(("eth_truncated_10", "dn_drop_eth_truncated", rst[:10]))
    v.append(("eth_truncated_13", "dn_drop_eth_truncated", rst[:13]))
    v.append(("eth_type_ipv6", "dn_drop_eth_type", bytes(b.eth(type=0x86DD)) + rst[14:]))
    v.append(("eth_type_vlan", "dn_drop_eth_type", bytes(b.eth(type=0x8100)) + rst[14:]))
    v.append(("eth_dst_other_unicast", "dn_drop_eth_dst",
              bytes(b.eth(dst="02:00:00:00:00:99")) + rst[14:]))
    # ---- ARP (the sender is an address nobody uses: nothing real is re-learned)
    spa = b.wh.rsplit(".", 1)[0] + ".200"
    arp = ARP(op=1, hwsrc=b.lmac, psrc=spa, pdst=b.wh)
    v.append(("arp_truncated", "dn_drop_arp_malformed", bytes(b.eth(type=0x0806) / arp)[:14 + 20]))
    v.append(("arp_hw_type_6", "dn_drop_arp_malformed",
              bytes(b.eth(type=0x0806) / ARP(hwtype=6, op=1, hwsrc=b.lmac, psrc=spa, pdst=b.wh))))
    v.append(("arp_op_3", "dn_drop_arp_malformed",
              bytes(b.eth(type=0x0806) / ARP(op=3, hwsrc=b.lmac, psrc=spa, pdst=b.wh))))
    v.append(("arp_multicast_sender_mac", "dn_drop_arp_malformed",
              bytes(b.eth(type=0x0806) / ARP(op=1, hwsrc="01:00:5e:00:00:01", psrc=spa, pdst=b.wh))))
    v.append(("arp_request_for_another_ip", "dn_drop_arp_not_us",
              bytes(b.eth(dst="ff:ff:ff:ff:ff:ff", type=0x0806) /
                    ARP(op=1, hwsrc=b.lmac, psrc=spa, pdst=subnet_other))))
    # ---- IPv4, each carrying the exact RST
    v.append(("ip_truncated_header", "dn_drop_ip_truncated", rst[:14 + 12]))
    v.append(("ip_version_6", "dn_drop_ip_version",
              bytes(b.eth() / b.ip(version=6) / TCP(bytes(rst_tcp)))))
    v.append(("ip_ihl_3", "dn_drop_ip_ihl", bytes(b.eth() / b.ip(ihl=3) / TCP(bytes(rst_tcp)))))
    v.append(("ip_ihl_15_past_frame", "dn_drop_ip_ihl",
              bytes(b.eth() / b.ip(ihl=15, options=[]) / TCP(bytes(rst_tcp)))[:14 + 40]))
    v.append(("ip_total_length_below_ihl", "dn_drop_ip_total_length",
              bytes(b.eth() / b.ip(len=19) / TCP(bytes(rst_tcp)))))
    v.append(("ip_total_length_past_frame", "dn_drop_ip_total_length",
              bytes(b.eth() / b.ip(len=140) / TCP(bytes(rst_tcp)))))
    bad = bytearray(rst)
    bad[14 + 10] ^= 0x5A
    v.append(("ip_checksum_bad", "dn_drop_ip_checksum", bytes(bad)))
    v.append(("ip_ttl_0", "dn_drop_ip_ttl", b.tcp(lport, rcv_nxt, snd_nxt, "RA", ip_kw={"ttl": 0})))
    v.append(("ip_dst_not_us", "dn_drop_ip_dst",
              b.tcp(lport, rcv_nxt, snd_nxt, "RA", ip_kw={"dst": subnet_other})))
    v.append(("ip_fragment_first_mf", "dn_drop_ip_fragment",
              b.tcp(lport, rcv_nxt, snd_nxt, "RA", ip_kw={"flags": "MF"})))
    v.append(("ip_fragment_offset", "dn_drop_ip_fragment",
              bytes(b.eth() / b.ip(flags=0, frag=1, proto=6) / Raw(rst_tcp))))
    v.append(("ip_fragment_tiny_tcp_header", "dn_drop_ip_fragment",
              bytes(b.eth() / b.ip(flags="MF", proto=6) / Raw(rst_tcp[:8]))))
    v.append(("ip_proto_udp", "dn_drop_ip_proto",
              bytes(b.eth() / b.ip() / UDP(sport=lport, dport=b.port) / Raw(JUNK))))
    v.append(("ip_proto_253", "dn_drop_ip_proto", bytes(b.eth() / b.ip(proto=253) / Raw(JUNK))))
    # ---- ICMP
    v.append(("icmp_truncated", "dn_drop_icmp_truncated",
              bytes(b.eth() / b.ip(proto=1) / Raw(b"\x08\x00"))))
    v.append(("icmp_checksum_bad", "dn_drop_icmp_checksum",
              bytes(b.eth() / b.ip() / ICMP(type=8, chksum=0x1234) / Raw(b"x" * 32))))
    v.append(("icmp_type_timestamp", "dn_drop_icmp_type",
              bytes(b.eth() / b.ip() / ICMP(type=13) / Raw(b"\0" * 12))))
    # ---- TCP on the live tuple
    v.append(("tcp_checksum_bad_exact_rst", "dn_drop_l4_checksum",
              b.tcp_raw(b.seg_bytes(lport, rcv_nxt, snd_nxt, F_RST | F_ACK, 5, good_sum=False))))
    v.append(("tcp_checksum_bad_exact_data", "dn_drop_l4_checksum",
              b.tcp_raw(b.seg_bytes(lport, rcv_nxt, snd_nxt, F_ACK | F_PSH, 5, payload=JUNK,
                                    good_sum=False))))
    short = struct.pack("!HHII", lport, b.port, rcv_nxt, 0)
    v.append(("tcp_shorter_than_header_12B", "drop_malformed",
              b.tcp_raw(fix_word(b.lnx, b.wh, short, 10))))
    for doff in (0, 4):
        v.append(("tcp_data_offset_%d_rst" % doff, "drop_malformed",
                  b.tcp_raw(b.seg_bytes(lport, rcv_nxt, snd_nxt, F_RST | F_ACK, doff))))
    v.append(("tcp_data_offset_15_past_packet", "drop_malformed",
              b.tcp_raw(b.seg_bytes(lport, rcv_nxt, snd_nxt, F_RST | F_ACK, 15))))
    v.append(("tcp_data_offset_15_past_packet_data", "drop_malformed",
              b.tcp_raw(b.seg_bytes(lport, rcv_nxt, snd_nxt, F_ACK, 15, payload=JUNK[:20]))))
    opts = {
        "tcp_opt_ts_runs_past_header": b"\x01\x01\x08\x0a",
        "tcp_opt_kind_without_length": b"\x01\x01\x01\x02",
        "tcp_opt_len_0": b"\x05\x00\x01\x01",
        "tcp_opt_len_1": b"\x1e\x01\x00\x00",
        "tcp_opt_mss_len_3": b"\x02\x03\x05\x01",
        "tcp_opt_wscale_len_4": b"\x03\x04\x07\x01",
        "tcp_opt_ts_len_9": b"\x08\x09" + b"\0" * 7 + b"\x00\x00\x00",
        "tcp_opt_unknown_len_255": b"\xfd\xff\x00\x00",
    }
    for name, o in opts.items():
        doff = 5 + len(o) // 4
        v.append((name + "_data", "drop_malformed",
                  b.tcp_raw(b.seg_bytes(lport, rcv_nxt, snd_nxt, F_ACK | F_PSH, doff, o, JUNK))))
        v.append((name + "_rst", "drop_malformed",
                  b.tcp_raw(b.seg_bytes(lport, rcv_nxt, snd_nxt, F_RST | F_ACK, doff, o))))
    flags = {"syn_fin": F_SYN | F_FIN, "syn_rst": F_SYN | F_RST, "null": 0,
             "fin_psh_urg_xmas": F_FIN | F_PSH | F_URG}
    for name, f in flags.items():
        v.append(("tcp_flags_" + name, "drop_malformed",
                  b.tcp_raw(b.seg_bytes(lport, rcv_nxt, snd_nxt, f, 5, payload=JUNK))))
    v.append(("tcp_src_port_0", "drop_malformed",
              b.tcp_raw(b.seg_bytes(0, 1000, 0, F_SYN, 5))))
    land = b.seg_bytes(b.port, 1000, 0, F_SYN, 5)
    v.append(("tcp_land_own_addr_and_port", "drop_malformed",
              bytes(b.eth() / b.ip(src=b.wh, proto=6) /
                    Raw(land[:16] + struct.pack("!H", tcp_cksum(b.wh, b.wh, land[:16] + b"\0\0"
                                                                + land[18:])) + land[18:]))))
    return v
