#!/usr/bin/env python3
"""Keeps Lathe's layers honest; CMakeLists.txt runs it as part of the build.

Each layer (lathe/<layer>/) may use only the layers CMakeLists.txt declares below it. Two checks:

  includes  every `#include "lathe/<other>/..."` in lathe/<layer>/ names the layer itself or an
            allowed one; else the build fails naming file, line and the allowed layers.
  symbols   every lathe:: symbol the layer's static library uses but does not define is defined
            by an allowed layer's library (catches a call into a layer above through a header
            declared lower down, e.g. a Tensor member defined in ops called from kernels);
            and no member of a class that a lower layer's header defines is defined here (a
            class's members live in the layer that declares the class: core's Tensor cannot
            have a member implemented in ops).

Each check writes --stamp on success so the build reruns it only when its inputs change.
"""
import argparse
import os
import re
import subprocess
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"lathe/([A-Za-z0-9_]+)/')


def check_includes(root, layer, allowed):
    ok = {layer, *allowed}
    errors = []
    layer_dir = os.path.join(root, "lathe", layer)
    for dirpath, _, files in os.walk(layer_dir):
        for name in sorted(files):
            if not name.endswith((".h", ".cpp")):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE_RE.match(line)
                    if m and m.group(1) not in ok:
                        rel = os.path.relpath(path, root)
                        errors.append(
                            f"{rel}:{lineno}: error: layer '{layer}' includes "
                            f"lathe/{m.group(1)}/, which is not below it; '{layer}' may include "
                            f"only: {', '.join(sorted(allowed)) or '(nothing)'}")
    return errors


def nm_symbols(archive, undefined):
    args = ["nm", "-g", "--format=posix", "--undefined-only" if undefined else "--defined-only"]
    out = subprocess.run(args + [archive], capture_output=True, text=True, check=True).stdout
    # "<name> <type> [value [size]]"; archive member headers look like "lib.a[x.o]:".
    return {line.split(" ", 1)[0] for line in out.splitlines() if line and not line.endswith(":")}


# Mangled names in namespace lathe: functions, members, vtables, typeinfo (any qualifiers).
LATHE_SYMBOL_RE = re.compile(r"^_Z(?:N[rVKOR]*|T[VIS]N?)5lathe")


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    return out.stdout.splitlines() if out.returncode == 0 else names


# A class or struct definition (not a forward declaration) in a header: "class Tensor {",
# "struct TensorImpl {", "class ShapeEnv final : private SimplifyContext {".
CLASS_RE = re.compile(r"^\s*(?:class|struct)\s+([A-Za-z_]\w*)(?:\s+final)?\s*(?::[^;{]*)?\{")


def declared_classes(root, layer):
    """Names of the classes lathe/<layer>/'s headers define."""
    names = set()
    for dirpath, _, files in os.walk(os.path.join(root, "lathe", layer)):
        for name in files:
            if name.endswith(".h"):
                with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                    names.update(m.group(1) for m in map(CLASS_RE.match, f) if m)
    return names


def split_scope(name):
    """'lathe::Tensor::view(...) const' -> ['lathe', 'Tensor', 'view'] (template args dropped)."""
    op = name.find("::operator")
    head = name[:op] + "::operator" if op >= 0 else name
    parts, depth, cur = [], 0, ""
    i = 0
    while i < len(head):
        c = head[i]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif depth == 0 and c == "(":
            break
        elif depth == 0 and head.startswith("::", i):
            parts.append(cur)
            cur = ""
            i += 2
            continue
        elif depth == 0:
            cur += c
        i += 1
    parts.append(cur)
    return [p.strip() for p in parts]


def check_members(layer, archive, root, lower_layers):
    """Members of a lower layer's classes that this layer's library defines (strong symbols)."""
    own = declared_classes(root, layer)
    owner = {}
    for lower in lower_layers:
        for cls in declared_classes(root, lower) - own:
            owner.setdefault(cls, lower)
    out = subprocess.run(["nm", "-g", "--format=posix", "--defined-only", archive],
                         capture_output=True, text=True, check=True).stdout
    strong = sorted({f[0] for f in (line.split(" ") for line in out.splitlines())
                     if len(f) >= 2 and f[1] == "T" and LATHE_SYMBOL_RE.match(f[0])})
    errors = []
    for sym in demangle(strong):
        parts = split_scope(sym)
        if len(parts) >= 3 and parts[0] == "lathe" and parts[-2] in owner:
            errors.append(
                f"{os.path.basename(archive)}: error: layer '{layer}' defines {sym}, a member "
                f"of {parts[-2]}, which lathe/{owner[parts[-2]]}/ declares; a class's members "
                f"are defined in the layer that declares it")
    return errors


def check_symbols(layer, archive, dep_archives):
    defined = nm_symbols(archive, undefined=False)
    for dep in dep_archives:
        defined |= nm_symbols(dep, undefined=False)
    missing = sorted(s for s in nm_symbols(archive, undefined=True)
                     if LATHE_SYMBOL_RE.match(s) and s not in defined)
    missing = demangle(missing)
    return [f"{os.path.basename(archive)}: error: layer '{layer}' uses {s}, which no layer "
            f"below it defines" for s in missing]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("check", choices=["includes", "symbols"])
    p.add_argument("--layer", required=True)
    p.add_argument("--allowed", default="", help="';'- or ','-separated layers below this one")
    p.add_argument("--root", help="source root (includes; symbols: with --allowed, also checks "
                   "where members of lower layers' classes are defined)")
    p.add_argument("--archive", help="the layer's static library (symbols)")
    p.add_argument("--deps", default="", help="';'-separated static libraries below it (symbols)")
    p.add_argument("--stamp", required=True)
    a = p.parse_args()
    allowed = [x for x in re.split(r"[;,]", a.allowed) if x]
    if a.check == "includes":
        errors = check_includes(a.root, a.layer, allowed)
    else:
        errors = check_symbols(a.layer, a.archive, [x for x in a.deps.split(";") if x])
        if a.root:
            errors += check_members(a.layer, a.archive, a.root, allowed)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        print(f"[layers] {len(errors)} upward dependenc{'y' if len(errors) == 1 else 'ies'} in "
              f"lathe/{a.layer}/; the layer order is declared in CMakeLists.txt (lathe_layer)",
              file=sys.stderr)
        return 1
    with open(a.stamp, "w") as f:
        f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
