#!/usr/bin/env python3
"""Measures the XLA_FLAGS table of a PJRT CPU plugin build (the file XlaFlags checks XLA_FLAGS against).

XLA parses XLA_FLAGS when the first client is created and ends the process on an unknown flag or a value it
cannot parse, so every probe runs in a forked child (tools/xla-flags-probe.c). The candidates are the flags of
a reference table (the pinned build's, measured the same way) and every xla_* string in the plugin file:

- a candidate whose probe says "Unknown flag" is not a flag of this build;
- a flag of the reference table with listed values (enum, list, names, fuel, false) keeps those of its values
  this build accepts, each probed alone;
- any other flag gets its kind from which of a fixed set of values it accepts (bool, int32, int64, float,
  string); a flag that fits none is written "unmeasured" and XlaFlags refuses any value for it, naming why.

    cc -O1 -I ~/.cache/xla-actors/include tools/xla-flags-probe.c -o /tmp/xla-flags-probe -ldl
    python3 tools/xla_flags_table.py /tmp/xla-flags-probe PLUGIN.so REFERENCE.flags "build version" > OUT.flags

Prints a summary (flags, kinds, differences from the reference) on stderr.
"""
import re
import subprocess
import sys

BAD = "zz_bad"
KIND_PROBES = ["true", "false", "1", "0", "2", "-3", "2147483648", "1.5", "inf", BAD]


def probe(probe_bin, plugin, values):
    """{value: True when the plugin accepted it} for each XLA_FLAGS value, one forked child each."""
    out = subprocess.run([probe_bin, plugin], input="".join(v + "\n" for v in values), capture_output=True,
                         text=True, check=True).stdout
    result = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if parts[0] == "OK":
            result[parts[1]] = True
        elif parts[0] == "DIE":
            result[parts[-1]] = False if parts[2] != "UNKNOWN" else None
    missing = [v for v in values if v not in result]
    if missing:
        raise SystemExit(f"the probe gave no answer for {missing[:3]}...")
    return result


def read_table(path):
    header, entries = [], {}
    for line in open(path, encoding="utf-8"):
        if line.startswith("#"):
            header.append(line.rstrip("\n"))
        elif line.strip():
            fields = line.split()
            entries[fields[0]] = fields[1:]
    return header, entries


def main():
    probe_bin, plugin, reference, build = sys.argv[1:5]
    header, ref = read_table(reference)
    strings = subprocess.run(["strings", "-n", "6", plugin], capture_output=True, text=True, check=True).stdout
    candidates = sorted(set(ref) | {s for s in strings.split() if re.fullmatch(r"xla_[a-z0-9_]+", s)})
    known = probe(probe_bin, plugin, [f"--{n}={BAD}" for n in candidates])
    flags = [n for n in candidates if known[f"--{n}={BAD}"] is not None]
    table, notes = {}, []
    kinds = probe(probe_bin, plugin, [f"--{n}={v}" for n in flags for v in KIND_PROBES] + [f"--{n}" for n in flags])
    listed = {}
    for name in flags:
        entry = ref.get(name)
        if entry and entry[0] in ("enum", "enum-any-case", "list", "names", "fuel", "false"):
            listed[name] = entry
    value_probes = []
    for name, entry in listed.items():
        kind = entry[0]
        values = entry[2:] if kind == "list" else entry[1:]
        if kind == "fuel":
            values = ["abc=1", "=2"]
        elif kind == "false":
            values = ["false", "true"]
        value_probes += [f"--{name}={v}" for v in values]
    accepted = probe(probe_bin, plugin, value_probes) if value_probes else {}
    for name in flags:
        ok = {v: kinds[f"--{name}={v}"] for v in KIND_PROBES}
        if name in listed:
            entry = listed[name]
            kind = entry[0]
            if kind == "false":
                table[name] = ["bool"] if accepted[f"--{name}=true"] else ["false"]
            elif kind == "fuel":
                table[name] = entry
            else:
                head = entry[:2] if kind == "list" else entry[:1]
                values = entry[2:] if kind == "list" else entry[1:]
                kept = [v for v in values if accepted[f"--{name}={v}"]]
                if kept != values:
                    notes.append(f"{name}: values {sorted(set(values) - set(kept))} refused by this build")
                table[name] = head + kept
        elif ok[BAD]:
            table[name] = ["string"]
        elif ok["true"] and ok["false"] and ok["1"] and ok["0"] and not ok["2"]:
            table[name] = ["bool"]
        elif ok["2"] and ok["-3"] and not ok["1.5"]:
            table[name] = ["int64" if ok["2147483648"] else "int32"]
        elif ok["1.5"] and ok["inf"]:
            table[name] = ["float"]
        else:
            table[name] = ["unmeasured"]
        if name in ref and ref[name][0] != table[name][0]:
            notes.append(f"{name}: {ref[name][0]} in the reference, {table[name][0]} here")
    print(f"# The flags {build} accepts in XLA_FLAGS, and their values: measured by tools/xla_flags_table.py (a forked")
    print("# child per flag and value, tools/xla-flags-probe.c) from the reference table of the pinned build and the")
    print("# plugin's xla_* strings. XlaFlags refuses anything else before the plugin reads it. Kinds as in the")
    print("# reference table, plus:")
    print("#   unmeasured    a flag whose syntax none of the probes found: any value is refused")
    for line in header[4:]:
        print(line)
    for name in sorted(table):
        print(" ".join([name] + table[name]))
    gone = sorted(set(ref) - set(flags))
    new = sorted(set(flags) - set(ref))
    counts = {}
    for entry in table.values():
        counts[entry[0]] = counts.get(entry[0], 0) + 1
    print(f"{build}: {len(table)} flags {dict(sorted(counts.items()))}; {len(gone)} of the reference's are gone,"
          f" {len(new)} are new", file=sys.stderr)
    for line in notes + [f"gone: {' '.join(gone)}", f"new: {' '.join(new)}"]:
        print(line, file=sys.stderr)


if __name__ == "__main__":
    main()
