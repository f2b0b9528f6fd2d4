#!/usr/bin/env python3
"""test_shards_place.py DOCS/PROTOCOL.MD -- the placement of a sharded
ordod:// place, by an implementation of its own (below, written from the
words of docs/protocol.md, "## Shards"), against that section's table of
test vectors, which tests/unit/test_shards.c checks against the C code; the
section's Python block must give the same answers, and a 4th shard must
move 20%..30% of 10,000 keys, all to itself."""
import re
import sys

M = (1 << 64) - 1


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for byte in data:
        h ^= byte
        h = (h * 0x100000001B3) % (1 << 64)
    return h


def fmix64(x):
    for shift, mul in ((33, 0xFF51AFD7ED558CCD), (33, 0xC4CEB9FE1A85EC53)):
        x = ((x ^ (x >> shift)) * mul) & M
    return x ^ (x >> 33)


def place(key, names):
    best = None
    for name in names:
        score = fmix64(fnv1a64(key) ^ fnv1a64(name.encode()))
        if best is None or score > best[0] or (score == best[0] and
                                               name.encode() < best[1].encode()):
            best = (score, name)
    return best[1]


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    sec = text.split("## Shards", 1)[1].split("\n## ", 1)[0]
    names = re.findall(r"`(\d+\.\d+\.\d+\.\d+:\d+)`", sec.split("| key |")[0])
    assert len(names) == 3, names
    rows = re.findall(r"^\| `([^`]+)` \| (0x[0-9a-f]+) \| (\S+) \|$", sec, re.M)
    assert len(rows) == 8, rows
    code = sec.split("```python\n", 1)[1].split("```", 1)[0]
    published = {}
    exec(code, published)  # the section's own 10 lines
    for key, fnv, shard in rows:
        k = key.encode()
        assert fnv1a64(k) == int(fnv, 16), (key, hex(fnv1a64(k)), fnv)
        assert place(k, names) == shard, (key, place(k, names), shard)
        assert place(k, names[::-1]) == shard, key
        assert published["shard_of"](k, names) == shard, key
    four = names + ["10.0.0.4:7411"]
    moved = 0
    for i in range(10000):
        k = b"key:%d" % i
        a, b = place(k, names), place(k, four)
        if a != b:
            assert b == four[3], (k, a, b)
            moved += 1
    assert 2000 <= moved <= 3000, moved
    print("ok: 8 vectors, both implementations; a 4th shard moved %d of 10000"
          % moved)


main()
