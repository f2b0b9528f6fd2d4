#!/usr/bin/env bash
# graph.sh -- `ordo graph --naive-demo` sets up a ring of three txns, each
# holding one key and waiting for the next, and prints the live wait-for
# graph: in DOT, a digraph with three edges forming a ring (which Graphviz
# accepts, when it is installed); in JSON, three edges. Then `ordo bank
# --naive --graph FILE` writes the cycle of its first deadlock to FILE.
. "$(dirname "$0")/lib.sh"

# ring_check FILE FORMAT: FILE holds exactly three edges a->b forming one
# cycle through three distinct txns.
ring_check() {
  python3 - "$1" "$2" <<'PY' || fail "the $2 graph is not a ring of three"
import json, re, sys
text = open(sys.argv[1]).read()
if sys.argv[2] == "json":
    j = json.loads(text)
    edges = [(e["from"], e["to"]) for e in j["edges"]]
    assert sorted(j["waiting"]) == sorted({a for a, _ in edges}), "waiting"
    assert all(e["mode"] == "X" and e["soft"] is False for e in j["edges"])
else:
    edges = re.findall(r'"txn (\d+)" -> "txn (\d+)"', text)
assert len(edges) == 3, "%d edges" % len(edges)
nxt = dict(edges)
assert len(nxt) == 3 and set(nxt.values()) == set(nxt), "not a permutation"
a = next(iter(nxt))
assert nxt[nxt[nxt[a]]] == a and nxt[a] != a, "not one cycle of three"
PY
}

run graph --naive-demo
expect_rc 0 graph --naive-demo
grep -q '^digraph ' "$OUT" || fail "no digraph in the DOT output"
[ "$(grep -c -- '->' "$OUT")" -eq 3 ] || fail "not three edges"
ring_check "$OUT" dot
if command -v dot >/dev/null 2>&1; then
  dot -Tsvg "$OUT" >/dev/null 2>"$TMP/dot.err" ||
    fail "dot -Tsvg rejects the output: $(cat "$TMP/dot.err")"
fi
[ ! -s "$ERR" ] || fail "a passing demo wrote to stderr"

run graph --naive-demo --format json
expect_rc 0 graph --naive-demo --format json
ring_check "$OUT" json

run graph --format=dot --naive-demo
expect_rc 0 graph --format=dot --naive-demo
ring_check "$OUT" dot

# --graph FILE: the cycle of the first deadlock of a naive run, as DOT.
run_naive --graph "$TMP/cycle.dot" --json
[ -s "$TMP/cycle.dot" ] || fail "--graph did not write its file"
grep -q '^digraph ' "$TMP/cycle.dot" || fail "the --graph file has no digraph"
grep -q 'color=red' "$TMP/cycle.dot" || fail "the victim is not drawn red"
grep -q '"txn [0-9]*" -> "txn [0-9]*" \[label="acct:0000000[01] X' \
  "$TMP/cycle.dot" || fail "no edge labelled with key and mode"
json_check 'j["ok"] is True' 'j["deadlocks"] > 0' \
  'j["graph"]["deadlock"] >= 1 and j["graph"]["edges"] >= 2' \
  'j["graph"]["file"].endswith("cycle.dot")'
if command -v dot >/dev/null 2>&1; then
  dot -Tsvg "$TMP/cycle.dot" >/dev/null 2>"$TMP/dot.err" ||
    fail "dot -Tsvg rejects the --graph file: $(cat "$TMP/dot.err")"
fi

# Without a deadlock the file still holds a (empty) digraph that says so.
run bank --graph "$TMP/none.dot" --watchdog "$WD"
expect_rc 0 bank --graph FILE --watchdog "$WD"
grep -q '^digraph ' "$TMP/none.dot" || fail "no digraph without a deadlock"
grep -q 'no deadlock' "$TMP/none.dot" || fail "the empty graph does not say why"
grep -q "^graph .*no deadlock was recorded" "$OUT" ||
  fail "the summary does not say the graph is empty"

# A path that cannot be created fails before any work, with exit 1.
run bank --graph "$TMP/no/such/dir/x.dot"
expect_rc 1 bank --graph no/such/dir
grep -q "cannot create the --graph file" "$ERR" || fail "no error line"
echo "ok: ordo graph --naive-demo and ordo bank --graph"
