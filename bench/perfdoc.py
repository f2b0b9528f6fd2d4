#!/usr/bin/env python3
"""perfdoc.py -- refreshes docs/performance.md from a bench run, and checks
bench/results/latest.json against bench/schema.json; see bench/README.md,
"Plots" and "Publishing".

  bench/perfdoc.py --check [JSON]     validate JSON (default
                                      bench/results/latest.json) against
                                      bench/schema.json; exit 1 if it fails
  bench/perfdoc.py --publish          rewrite the generated part of
                                      docs/performance.md and copy the
                                      plots it shows into docs/img/

--publish reads bench/results/: latest.json (the rows), machine.json (where
and how they ran; scripts/bench.sh writes it), and plots.tsv and the
bench-*.png it lists (bench/plot.sh draws them). It replaces only the text between the two perfdoc markers of
docs/performance.md, so the prose around it stays as written; it copies each
plot it links to docs/img/ and removes the docs/img/bench-*.png that it no
longer links. scripts/bench.sh --publish (make bench PUBLISH=1) runs it after
a run; it can also run on its own, on the last run's results.

Only the standard library: the check knows the subset of JSON Schema that
bench/schema.json uses, and refuses a keyword it does not know rather than
skip it.
"""
import argparse
import json
import math
import os
import re
import shutil
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = "<!-- perfdoc:begin"
END = "<!-- perfdoc:end -->"

# ---- The schema check ------------------------------------------------------

ANNOTATIONS = {"$schema", "title", "description", "$defs"}
TYPES = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def resolve(root, ref):
    if not ref.startswith("#/"):
        raise ValueError(f"unsupported $ref {ref}")
    node = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def validate(value, schema, root, path, errors):
    """Appends to errors each way value breaks schema (a subset of draft
    2020-12: $ref, type, properties, required, additionalProperties, items,
    pattern, minimum, propertyNames)."""
    for key in schema:
        if key not in ANNOTATIONS and key not in {
                "$ref", "type", "properties", "required", "additionalProperties",
                "items", "pattern", "minimum", "propertyNames"}:
            raise ValueError(f"perfdoc.py does not know the keyword {key}")
    if "$ref" in schema:
        validate(value, resolve(root, schema["$ref"]), root, path, errors)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) \
            else [schema["type"]]
        if not any(TYPES[t](value) for t in types):
            errors.append(f"{path}: {json.dumps(value)} is not {' or '.join(types)}")
            return
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                errors.append(f"{path}: missing \"{name}\"")
        for name, v in value.items():
            if "propertyNames" in schema:
                validate(name, schema["propertyNames"], root,
                         f"{path} (key {name})", errors)
            if name in props:
                validate(v, props[name], root, f"{path}.{name}", errors)
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected \"{name}\"")
            elif isinstance(schema.get("additionalProperties"), dict):
                validate(v, schema["additionalProperties"], root,
                         f"{path}.{name}", errors)
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            validate(v, schema["items"], root, f"{path}[{i}]", errors)
    if isinstance(value, str) and "pattern" in schema:
        if not re.search(schema["pattern"], value):
            errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if TYPES["number"](value) and "minimum" in schema:
        if value < schema["minimum"]:
            errors.append(f"{path}: {value} < {schema['minimum']}")


def check(path):
    with open(os.path.join(ROOT, "bench", "schema.json")) as f:
        schema = json.load(f)
    with open(path) as f:
        data = json.load(f)
    errors = []
    validate(data, schema, schema, "$", errors)
    for e in errors:
        print(f"perfdoc.py: {path}: {e}", file=sys.stderr)
    return 1 if errors else 0


# ---- The generated part of docs/performance.md ------------------------------


def num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) \
        and math.isfinite(v) else None


def fmt(v):
    """A value as ordo_bench's table prints it: k/M/G for large ones."""
    v = num(v)
    if v is None:
        return "-"
    for scale, suffix in ((1e9, "G"), (1e6, "M")):
        if v >= scale:
            return f"{v / scale:.2f}{suffix}"
    if v >= 1e4:
        return f"{v / 1e3:.1f}k"
    return f"{v:.1f}" if v >= 1 else f"{v:.3g}"


def para(text):
    """A paragraph of Markdown, wrapped as the hand-written docs are."""
    return textwrap.fill(text, width=78, break_on_hyphens=False) + "\n"


def cell(s):
    return str(s).replace("|", "\\|")


def generate(rows, machine, plots):
    out = []
    m = machine or {}
    out.append("### The machine\n")
    if not machine:
        out.append("- (bench/results/machine.json was missing: unknown)\n")
    else:
        out.append(f"- date: {m.get('date', '?')}")
        out.append(f"- CPU: {m.get('cpu', '?')}; {m.get('nproc', '?')} cores "
                   "online (nproc)")
        out.append(f"- kernel: {m.get('kernel', '?')}")
        out.append(f"- compiler: {m.get('compiler', '?')}; build type "
                   f"{m.get('build_type', '?')}")
        out.append(f"- ordo at commit {m.get('commit', '?')}")
        out.append(f"- run: `{m.get('command', '?')}`; {m.get('run', '?')}")
        out.append(f"- load average when it started: {m.get('load', '?')} "
                   "(1, 5, 15 min)")
        out.append("")
    out.append("### The rows\n")
    out.append(para("`ordo` and `peer` are the medians of each side's runs, "
                    "in the row's metric; `ratio` is how many times better "
                    "ordo is."))
    out.append("| row | workload (vs peer) | metric | ordo | peer | ratio "
               "| target | met |")
    out.append("|---|---|---|---:|---:|---:|---:|---|")
    for r in rows:
        ratio = "-" if num(r["ratio"]) is None else f"{r['ratio']:.3g}"
        target = "-" if num(r["target"]) is None else f">= {r['target']:.2f}"
        met = {None: "-", True: "yes", False: "**no**"}[r["met"]]
        out.append(f"| `{r['id']}` | {cell(r['row'])} (vs "
                   f"{cell(r['peer_name'])}) | {cell(r['metric'])} | "
                   f"{fmt(r['ordo'])} | {fmt(r['peer'])} | {ratio} | {target} "
                   f"| {met} |")
    extra = [r for r in rows if r.get("extra")]
    if extra:
        out.append("\n### Further values\n")
        out.append(para("What some rows report beside their metric, the "
                        "median of each side's runs (bench/README.md says "
                        "what each value is and its unit): the longest "
                        "waits, the Redlock rows' PING floor, and more."))
        out.append("| row | value | ordo | peer |")
        out.append("|---|---|---:|---:|")
        for r in extra:
            for name, v in r["extra"].items():
                out.append(f"| `{r['id']}` | {cell(name)} | "
                           f"{fmt(v.get('ordo'))} | {fmt(v.get('peer'))} |")
    counted = [r for r in rows if "instructions" in r]
    if counted:
        out.append("\n### Instructions per op\n")
        out.append(para("Counted by callgrind over a fixed number of "
                        "iterations of each side (`ordo_bench --count`): the "
                        "same on every run of the same build, whatever the "
                        "machine's load. ratio = peer ÷ ordo."))
        out.append("| row | iterations | ordo | peer | ratio |")
        out.append("|---|---:|---:|---:|---:|")
        for r in counted:
            ins = r["instructions"]
            ratio = "-" if num(ins["ratio"]) is None else f"{ins['ratio']:.3g}"
            out.append(f"| `{r['id']}` | {ins['iterations']} | "
                       f"{ins['ordo']:.1f} | {ins['peer']:.1f} | {ratio} |")
    if plots:
        out.append("\n### Plots\n")
        for name, alt in plots:
            out.append(f"![{alt}](img/{name})\n")
    return "\n".join(out).rstrip() + "\n"


def publish(results, doc, img):
    with open(os.path.join(results, "latest.json")) as f:
        rows = json.load(f)
    machine = None
    try:
        with open(os.path.join(results, "machine.json")) as f:
            machine = json.load(f)
    except FileNotFoundError:
        print("perfdoc.py: no machine.json in results; the machine is "
              "unknown", file=sys.stderr)
    # The plots that bench/plot.sh drew, in its order, with its captions.
    plots = []
    try:
        with open(os.path.join(results, "plots.tsv")) as f:
            for line in f:
                name, caption = line.rstrip("\n").split("\t", 1)
                if os.path.exists(os.path.join(results, name)):
                    plots.append((name, caption))
    except FileNotFoundError:
        print("perfdoc.py: no plots.tsv in results (was gnuplot missing?); "
              "publishing the tables only", file=sys.stderr)

    with open(doc) as f:
        text = f.read()
    b, e = text.find(BEGIN), text.find(END)
    if b < 0 or e < b:
        print(f"perfdoc.py: {doc} lacks the markers '{BEGIN} ...' and "
              f"'{END}'", file=sys.stderr)
        return 1
    b = text.index("\n", b) + 1
    text = text[:b] + "\n" + generate(rows, machine, plots) + "\n" + text[e:]
    with open(doc + ".tmp", "w") as f:
        f.write(text)
    os.replace(doc + ".tmp", doc)

    os.makedirs(img, exist_ok=True)
    for n, _ in plots:
        shutil.copyfile(os.path.join(results, n), os.path.join(img, n))
    for n in os.listdir(img):
        if n.startswith("bench-") and n.endswith(".png") \
                and n not in dict(plots):
            os.remove(os.path.join(img, n))
    print(f"perfdoc.py: wrote {os.path.relpath(doc, ROOT)} and "
          f"{len(plots)} plot(s) in {os.path.relpath(img, ROOT)}/",
          file=sys.stderr)
    return 0


def main():
    ap = argparse.ArgumentParser(
        description="Checks a bench run's JSON, or publishes it to "
                    "docs/performance.md.")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", nargs="?", metavar="JSON",
                      const=os.path.join(ROOT, "bench/results/latest.json"),
                      help="validate JSON against bench/schema.json")
    mode.add_argument("--publish", action="store_true",
                      help="refresh docs/performance.md and docs/img/bench-*")
    ap.add_argument("--results", default=os.path.join(ROOT, "bench/results"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs/performance.md"))
    ap.add_argument("--img", default=os.path.join(ROOT, "docs/img"))
    args = ap.parse_args()
    if args.check is not None:
        return check(args.check)
    return publish(args.results, args.doc, args.img)


if __name__ == "__main__":
    sys.exit(main())
