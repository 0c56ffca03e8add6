"""The names behind scripts/symbol-order (see there): a binary's functions under
names that outlive a rebuild, the functions callgrind saw run, a list resolved
to a binary's linker names, and the check that a binary leads with them.

    symbol_order.py collect BINARY CALLGRIND_OUT...   > LIST
    symbol_order.py resolve BINARY LIST               > RESOLVED
    symbol_order.py check BINARY LIST
"""

import os
import re
import subprocess
import sys

# LLVM's and GCC's local suffixes. Demangling (`nm -C`) already drops a legacy
# Rust name's hash and a v0 name's crate disambiguators.
SUFFIX = re.compile(r"(\.llvm\.\d+|\.\d+|\.(cold|part|constprop|isra)(\.\d+)?)+$")


def stable(demangled):
    """A demangled name without what changes from build to build."""
    return SUFFIX.sub("", demangled)


def functions(binary):
    """(address, linker name, stable name) of each function in `binary`, by
    address. `nm -p` keeps the symbol table's order, so the plain and the
    demangled listings pair line by line."""

    def listing(*flags):
        out = subprocess.run(
            ["nm", "-p", "--defined-only", *flags, binary],
            check=True, capture_output=True, text=True,
        ).stdout
        return [line.split(" ", 2) for line in out.splitlines()]

    found = []
    for plain, readable in zip(listing(), listing("-C")):
        if len(plain) == 3 and plain[1] in "tTwW":
            found.append((int(plain[0], 16), plain[2], stable(readable[2])))
    found.sort()
    return found


def collect(binary, outputs):
    """The stable names of the functions in `binary` that callgrind saw run:
    each file names a function once (`fn=(id) name`) in the object last named
    (`ob=(id) path`), and every function run has a block of its own."""
    by_linker_name = {name: readable for _, name, readable in functions(binary)}
    run = set()
    for path in outputs:
        objects, names, current = {}, {}, None
        for line in open(path, errors="replace"):
            m = re.match(r"^(c?)(ob|fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if not m:
                continue
            called, kind, id_, name = m.groups()
            table = objects if kind == "ob" else names
            if name:
                table[id_] = name
            if called:
                continue
            if kind == "ob":
                current = objects.get(id_)
            elif current and os.path.basename(current) == os.path.basename(binary):
                linker_name = re.sub(r"'\d+$", "", names[id_])
                if linker_name in by_linker_name:
                    run.add(by_linker_name[linker_name])
    for name in sorted(run):
        print(name)


def listed(path):
    return {line.rstrip("\n") for line in open(path) if line.strip()}


def resolve(binary, path):
    wanted = listed(path)
    for _, name, readable in functions(binary):
        if readable in wanted:
            print(name)


def check(binary, path):
    wanted = listed(path)
    code = functions(binary)
    ordered = [readable in wanted for _, _, readable in code]
    have = sum(ordered)
    found = len({readable for _, _, readable in code} & wanted)
    # The listed functions lead: nearly all of the first `have` by address.
    placed = sum(ordered[:have])
    print(f"symbol-order: {found} of {len(wanted)} listed names are in {binary} "
          f"({have} functions); {placed} of them lead its code")
    if found < 0.8 * len(wanted):
        print("symbol-order: under 80% of the list is left: regenerate it "
              "(scripts/symbol-order)", file=sys.stderr)
    if have == 0 or placed < 0.95 * have:
        sys.exit(f"symbol-order: {binary} was not linked in the order of {path} "
                 "(scripts/package links it so; see build.rs)")


if __name__ == "__main__":
    command, binary, *rest = sys.argv[1:]
    {"collect": lambda: collect(binary, rest),
     "resolve": lambda: resolve(binary, rest[0]),
     "check": lambda: check(binary, rest[0])}[command]()
