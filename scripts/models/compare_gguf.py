#!/usr/bin/env python3
"""compare_gguf.py: two GGUF files tensor by tensor: the same tensors, each of
the same type, shape and bytes; then the metadata keys and their values.

  python3 compare_gguf.py A.gguf B.gguf [--quiet]

Prints one line per difference and a summary ("same: N tensors, M keys");
exit 0 when they agree, 1 when they differ. Standard library only.
"""
import struct
import sys

# GGUF value kinds: struct format of a single value (strings and arrays apart)
KINDS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
# type id -> (name, values per block, bytes per block)
TYPES = {
    0: ("f32", 1, 4), 1: ("f16", 1, 2), 2: ("q4_0", 32, 18), 3: ("q4_1", 32, 20), 6: ("q5_0", 32, 22),
    7: ("q5_1", 32, 24), 8: ("q8_0", 32, 34), 10: ("q2_K", 256, 84), 11: ("q3_K", 256, 110),
    12: ("q4_K", 256, 144), 13: ("q5_K", 256, 176), 14: ("q6_K", 256, 210), 20: ("iq4_nl", 32, 18),
    23: ("iq4_xs", 256, 136), 26: ("i32", 1, 4), 30: ("bf16", 1, 2), 39: ("mxfp4", 32, 17),
}


class Reader:
    def __init__(self, data):
        self.d, self.o = data, 0

    def get(self, fmt):
        v = struct.unpack_from("<" + fmt, self.d, self.o)
        self.o += struct.calcsize("<" + fmt)
        return v[0]

    def string(self):
        n = self.get("Q")
        s = self.d[self.o:self.o + n]
        self.o += n
        return s

    def value(self, kind):
        if kind == 8:
            return self.string()
        if kind == 9:
            elem, count = self.get("I"), self.get("Q")
            return (elem, [self.value(elem) for _ in range(count)])
        return self.get(KINDS[kind])


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    if data[:4] != b"GGUF":
        sys.exit(f"{path}: not a GGUF file")
    r.o = 4
    _version, n_tensors, n_kv = r.get("I"), r.get("q"), r.get("q")
    kv = {}
    for _ in range(n_kv):
        key = r.string().decode("utf-8", "replace")
        kind = r.get("I")
        kv[key] = (kind, r.value(kind))
    align = kv.get("general.alignment", (4, 32))[1]
    infos = []
    for _ in range(n_tensors):
        name = r.string().decode("utf-8", "replace")
        nd = r.get("I")
        ne = [r.get("q") for _ in range(nd)]
        infos.append((name, ne, r.get("I"), r.get("Q")))
    start = (r.o + align - 1) // align * align
    tensors = {}
    for name, ne, typ, off in infos:
        tname, blk, size = TYPES.get(typ, (f"type{typ}", 1, 0))
        count = 1
        for n in ne:
            count *= n
        nbytes = count // blk * size
        tensors[name] = (tname, ne, data[start + off:start + off + nbytes])
    return kv, tensors, [i[0] for i in infos]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    quiet = "--quiet" in sys.argv
    if len(args) != 2:
        sys.exit(__doc__)
    kv_a, ta, order_a = load(args[0])
    kv_b, tb, order_b = load(args[1])
    diffs = 0

    def report(msg):
        nonlocal diffs
        diffs += 1
        if not quiet:
            print(msg)

    for name in order_a:
        if name not in tb:
            report(f"{name}: only in {args[0]}")
            continue
        (ty_a, ne_a, d_a), (ty_b, ne_b, d_b) = ta[name], tb[name]
        if ty_a != ty_b or ne_a != ne_b:
            report(f"{name}: {ty_a} {ne_a} vs {ty_b} {ne_b}")
        elif d_a != d_b:
            first = next(i for i in range(len(d_a)) if d_a[i] != d_b[i])
            nd = sum(1 for x, y in zip(d_a, d_b) if x != y)
            report(f"{name}: {ty_a}: {nd} of {len(d_a)} bytes differ, the first at {first}")
    for name in order_b:
        if name not in ta:
            report(f"{name}: only in {args[1]}")
    if order_a != order_b and not diffs:
        report("the tensors are in another order")
    for key in sorted(set(kv_a) | set(kv_b)):
        if kv_a.get(key) != kv_b.get(key):
            report(f"key {key}: {str(kv_a.get(key))[:60]} vs {str(kv_b.get(key))[:60]}")
    if diffs:
        print(f"differ: {diffs} differences")
        return 1
    print(f"same: {len(ta)} tensors, {len(kv_a)} keys")
    return 0


if __name__ == "__main__":
    sys.exit(main())
