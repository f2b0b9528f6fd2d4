#!/usr/bin/env python3
"""docs_examples.py ORDOD PROTOCOL_MD -- runs every `$ redis-cli -p 7411 ...`
example of docs/protocol.md against a real ordod (its port in place of 7411)
and compares redis-cli's output with the page's. Long numbers (tokens) and
32-digit hex session tokens may differ, and a lease's validity may read a
few milliseconds short; everything else must match.
Prints 'N passed, N failed'."""

import re
import subprocess
import sys
import tempfile

ORDOD, DOC = sys.argv[1], sys.argv[2]


def norm(text):
    # A lease's remaining validity may read a few ms short of the page's.
    text = re.sub(r"\(integer\) 29\d\d\d\b", "(integer) 30000", text)
    text = re.sub(r"\b[0-9a-f]{32}\b", "H", text)
    return re.sub(r"\b\d{6,}\b", "N", text).rstrip()


def examples(path):
    out, cur = [], None
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("$ redis-cli -p 7411 "):
            cur = [line[len("$ redis-cli -p 7411 "):], []]
            out.append(cur)
        elif line.startswith("```"):
            cur = None
        elif cur is not None:
            cur[1].append(line)
    return out


def main():
    d = tempfile.mkdtemp(prefix="ordod-docs-")
    srv = subprocess.Popen([ORDOD, "--port", "0", "--dir", d, "--verbose", "0"],
                           stdout=subprocess.PIPE, text=True)
    try:
        line = srv.stdout.readline()
        port = line.strip().split("=")[1]
        passed = failed = 0
        for args, want in examples(DOC):
            r = subprocess.run(["redis-cli", "--no-raw", "-p", port] +
                               args.split(), capture_output=True, text=True,
                               timeout=10)
            got = norm(r.stdout)
            exp = norm("\n".join(want))
            if r.returncode == 0 and got == exp:
                passed += 1
            else:
                failed += 1
                print("FAIL %s\n--- the page says:\n%s\n--- ordod said:\n%s"
                      % (args, exp, got))
        if passed == 0:
            failed += 1
            print("FAIL no example found in " + DOC)
        print("%d passed, %d failed" % (passed, failed))
        return 1 if failed else 0
    finally:
        srv.terminate()
        srv.wait(10)


sys.exit(main())
