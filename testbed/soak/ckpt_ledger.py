#!/usr/bin/env python3
"""ckpt_ledger.py — reads wharf PS checkpoints (ps_core/ps_ckpt.c's file format) and prints the
exactly-once ledger of the "count" model as one JSON line. Used by the fault soak
(testbed/tests/t_soak_short.sh, testbed/soak.sh) to read the servers' state from outside the
processes under test: the soak asks each PS for "save PATH" over the control plane, then
calls this on the files.

    ckpt_ledger.py CKPT [CKPT...]   ->  {"workers":{"0":{"value":V,"last_seq":S},..},"rows":N}
    ckpt_ledger.py --rows CKPT...   ->  the same plus "row_values":{"KEY":X,..}, every row of the
                                        table as the float it holds (for ledgers of other keys:
                                        sync's shared key 999, the GEO ledger's rows)

For worker w the count model pushes a gradient of -1 to key 1000+w of table 0 (SGD, lr 1,
zeros), one push at a time, sequences 1, 2, 3, ... So at any consistent cut the row's value
is the number of pushes of w that were applied and last_seq is the highest sequence applied:
value == last_seq means every sequence up to it was applied exactly once; value < last_seq
means applied pushes went missing (lost); value > last_seq means one was applied twice.

Why a reader of our own: the point is an independent look at what the server holds, not the
worker's own opinion of it. The file is checked as ps_load checks it (magic, version, sizes,
CRC32C over everything before the trailer); a damaged file is an error (exit 1, message on
stderr), never a guess.
"""
import json
import struct
import sys

COUNT_TABLE = 0
COUNT_KEY_BASE = 1000


def _crc32c_table():
    # Castagnoli polynomial, reflected; rte_hash_crc's convention: seed 0xffffffff, no final xor.
    poly = 0x82F63B78
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data, crc=0xFFFFFFFF):
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


class CkptError(Exception):
    pass


def read_ckpt(path):
    """Returns (rows of the count table {key: value}, last_seq {worker: max over shards})."""
    with open(path, "rb") as f:
        b = f.read()
    if len(b) < 32 + 16 or b[:8] != b"WHFCKPT1":
        raise CkptError(f"{path}: not a wharf checkpoint (bad magic or too short)")
    body = len(b) - 16
    total, crc = struct.unpack_from("<QI", b, body)
    if total != body or crc != crc32c(b[:body]):
        raise CkptError(f"{path}: trailer or CRC32C does not match (damaged file)")
    version, n_tables, _srv, _nsrv, _mode, _z = struct.unpack_from("<6I", b, 8)
    if version not in (1, 2, 3, 4, 5):
        raise CkptError(f"{path}: version {version}, expected 1 to 5")
    off = 32
    tables = []
    for _ in range(n_tables):
        if off + 40 > body:
            raise CkptError(f"{path}: truncated table descriptors")
        tid, _kind, dim, _optim, state, flags, rows, _dense = struct.unpack_from("<6IQQ", b, off)
        # version 3: flag bit 0, the table evicts and each row record ends in its u64 age
        ages = 8 if version >= 3 and flags & 1 else 0
        tables.append((tid, dim, state, rows, ages))
        off += 40
    values = {}
    for tid, dim, state, rows, ages in tables:
        rec = 8 + 4 * (dim + state) + ages
        if off + rows * rec > body:
            raise CkptError(f"{path}: table {tid} rows run past the end")
        for r in range(rows):
            key = struct.unpack_from("<Q", b, off + r * rec)[0]
            if tid == COUNT_TABLE:
                if key in values:
                    raise CkptError(f"{path}: key {key} appears twice")
                values[key] = struct.unpack_from("<f", b, off + r * rec + 8)[0]
        off += rows * rec
    if off + 8 > body:
        raise CkptError(f"{path}: no sequence section")
    n_shards, n_workers = struct.unpack_from("<II", b, off)
    off += 8
    # version 2 goes on with the durable section (log generation, barrier, sync sums), version 3
    # then with the memory policies' section, version 4 has the fence section (epoch,
    # incarnations) before the durable one, version 5 a GEO section last (GEO mode)
    end = off + 8 * n_shards * n_workers
    if end > body or (version == 1 and end != body):
        raise CkptError(f"{path}: sequence section size does not match the file")
    seqs = {}
    for s in range(n_shards):
        for w in range(n_workers):
            q = struct.unpack_from("<Q", b, off + 8 * (s * n_workers + w))[0]
            seqs[w] = max(seqs.get(w, 0), q)
    return values, seqs


def ledger(paths, rows=False):
    values, seqs = {}, {}
    for p in paths:
        v, s = read_ckpt(p)
        for k, x in v.items():
            if k in values:
                raise CkptError(f"{p}: key {k} is also on another server")
            values[k] = x
        for w, q in s.items():
            seqs[w] = max(seqs.get(w, 0), q)
    out = {}
    for w in sorted(seqs):
        v = values.get(COUNT_KEY_BASE + w, 0.0)
        if seqs[w] or v:
            out[str(w)] = {"value": int(round(v)), "last_seq": seqs[w]}
    res = {"workers": out, "rows": len(values)}
    if rows:
        res["row_values"] = {str(k): values[k] for k in sorted(values)}
    return res


def main(argv):
    rows = len(argv) > 1 and argv[1] == "--rows"
    paths = argv[2:] if rows else argv[1:]
    if not paths:
        print("usage: ckpt_ledger.py [--rows] CKPT [CKPT...]", file=sys.stderr)
        return 2
    try:
        print(json.dumps(ledger(paths, rows), separators=(",", ":")))
    except (OSError, CkptError, struct.error) as e:
        print(f"ckpt_ledger: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
