#!/usr/bin/env python3
"""Copy a GGUF file (v2/v3) with uint32 metadata keys added or replaced:
   gguf_addkv.py IN OUT KEY=VALUE...
The tensors' data is copied as is; only the header grows (the data section
stays aligned to general.alignment, 32 when absent). test_serve_infill.sh
gives a synthetic model FIM token ids (tokenizer.ggml.fim_*_token_id)."""
import struct
import sys

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def main():
    src, dst, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
    add = {}
    for p in pairs:
        k, v = p.split("=", 1)
        add[k] = int(v)
    b = open(src, "rb").read()
    if b[:4] != b"GGUF":
        sys.exit("not a GGUF file")
    version, n_t, n_kv = struct.unpack_from("<IQQ", b, 4)
    pos = 24

    def string(at):
        n = struct.unpack_from("<Q", b, at)[0]
        return b[at + 8:at + 8 + n], at + 8 + n

    def value(at, t):
        if t == 8:
            return string(at)[1]
        if t == 9:
            et, n = struct.unpack_from("<IQ", b, at)
            at += 12
            for _ in range(n):
                at = value(at, et)
            return at
        return at + SIZES[t]

    kept, alignment = [], 32
    for _ in range(n_kv):
        start = pos
        key, pos = string(pos)
        t = struct.unpack_from("<I", b, pos)[0]
        vend = value(pos + 4, t)
        if key == b"general.alignment":
            alignment = struct.unpack_from("<I", b, pos + 4)[0]
        if key.decode() not in add:
            kept.append(b[start:vend])
        pos = vend
    infos_start = pos
    for _ in range(n_t):
        _, pos = string(pos)
        nd = struct.unpack_from("<I", b, pos)[0]
        pos += 4 + 8 * nd + 4 + 8
    infos = b[infos_start:pos]
    data = b[(pos + alignment - 1) // alignment * alignment:]
    for k, v in add.items():
        kb = k.encode()
        kept.append(struct.pack("<Q", len(kb)) + kb + struct.pack("<II", 4, v))
    head = b"GGUF" + struct.pack("<IQQ", version, n_t, len(kept)) + b"".join(kept) + infos
    head += b"\0" * (-len(head) % alignment)
    open(dst, "wb").write(head + data)


main()
