#!/usr/bin/env python3
"""Source checks CTest runs on the library (lathe/); each prints file:line for what it finds and
exits 1 if it finds anything.

  options-env  every getenv("LATHE_...") outside the --allow files: a component reads its
               environment switches in one options file (issue 26, "configuration read once").
  sizes        every file over --max-file-lines lines and every function over --max-function-lines
               (issue 26, "the files show the design").

Functions are found by a heuristic, not a parser: with comments and string literals blanked, a
line ending in `{` whose text before the brace ends in `)` (then optionally const, noexcept,
override, final, mutable or a trailing return type) starts a function, unless it is a control
statement (if, for, while, switch, catch, else, do) or a lambda (`](`, `] (`, `]{`, other than
`operator[]`, anywhere in the signature: its lines back to the previous statement, block or blank
line). The function runs from the signature's first line to the brace matching its last `{`;
the lines counted are both ends and everything between. A function's own lambdas and local classes count
toward it and are not reported on their own.
"""
import argparse
import os
import re
import sys

SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc")


def library_files(root):
    lathe = os.path.join(root, "lathe")
    for dirpath, dirnames, filenames in os.walk(lathe):
        dirnames.sort()
        for f in sorted(filenames):
            if f.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(dirpath, f), root)


def read_lines(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        return f.read().split("\n")


GETENV = re.compile(r'getenv\s*\(\s*"LATHE_')


def check_options_env(root, allowed):
    found = []
    for rel in library_files(root):
        if rel in allowed:
            continue
        for i, line in enumerate(read_lines(root, rel), 1):
            if GETENV.search(line):
                found.append(f"{rel}:{i}: {line.strip()}")
    for f in found:
        print(f)
    if found:
        print(f"error: {len(found)} getenv(\"LATHE_...\") outside the options files "
              f"({', '.join(sorted(allowed))}): read the switch there, into the component's "
              "options struct", file=sys.stderr)
    return not found


def blank_comments_and_strings(text):
    """The text with comments, string and character literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + (c if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


CONTROL = re.compile(r"^\}?\s*(else\b|do\b|(if|for|while|switch|catch)\s*\()")
SIGNATURE_END = re.compile(
    r"\)\s*(const\b\s*|noexcept\b\s*(\([^)]*\))?\s*|override\b\s*|final\b\s*|mutable\b\s*|"
    r"->\s*[\w:<>,*&\s]+?\s*)*\{$")
LAMBDA = re.compile(r"\]\s*[({]|\]\s*mutable\b")


def signature_start(lines, i):
    """The first line of the declaration whose last line is lines[i]: back over the lines of a
    multi-line parameter list (up to 8), stopping after a statement, a block or a blank line."""
    j = i
    while j > 0 and i - j < 8:
        prev = lines[j - 1].strip()
        if not prev or prev.endswith((";", "{", "}", ":")) or prev.startswith("#"):
            break
        j -= 1
    return j


def starts_function(lines, i):
    """Whether lines[i] ends the signature of a function (or constructor); its first line."""
    s = lines[i].strip()
    if not s.endswith("{") or not SIGNATURE_END.search(s):
        return None
    first = signature_start(lines, i)
    sig = " ".join(l.strip() for l in lines[first:i + 1])
    if CONTROL.match(s) or CONTROL.match(sig):
        return None
    if LAMBDA.search(sig.replace("operator[]", "operator__")):
        return None
    return first


def functions(lines):
    """(first line, last line) of each function, 1-based: its signature to its closing brace."""
    i = 0
    while i < len(lines):
        first = starts_function(lines, i)
        if first is None:
            i += 1
            continue
        depth = 0
        j = i
        while j < len(lines):
            depth += lines[j].count("{") - lines[j].count("}")
            if depth <= 0:
                break
            j += 1
        yield first + 1, j + 1
        i = j + 1


def check_sizes(root, max_file, max_function):
    big_files, big_functions = [], []
    for rel in library_files(root):
        raw = read_lines(root, rel)
        count = len(raw) - (1 if raw and raw[-1] == "" else 0)
        if count > max_file:
            big_files.append((rel, count))
        code = blank_comments_and_strings("\n".join(raw)).split("\n")
        for first, last in functions(code):
            if last - first + 1 > max_function:
                big_functions.append((rel, first, last - first + 1, raw[first - 1].strip()))
    for rel, count in big_files:
        print(f"{rel}:1: file of {count} lines (limit {max_file})")
    for rel, first, count, sig in big_functions:
        print(f"{rel}:{first}: function of {count} lines (limit {max_function}): {sig[:90]}")
    if big_files or big_functions:
        print(f"error: {len(big_files)} files over {max_file} lines, {len(big_functions)} "
              f"functions over {max_function} lines: split them by concept", file=sys.stderr)
    return not big_files and not big_functions


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="check", required=True)
    env = sub.add_parser("options-env")
    env.add_argument("--root", required=True)
    env.add_argument("--allow", action="append", default=[],
                     help="a file (relative to --root) that may read LATHE_* variables")
    sizes = sub.add_parser("sizes")
    sizes.add_argument("--root", required=True)
    sizes.add_argument("--max-file-lines", type=int, default=600)
    sizes.add_argument("--max-function-lines", type=int, default=100)
    a = ap.parse_args()
    if a.check == "options-env":
        ok = check_options_env(a.root, set(a.allow))
    else:
        ok = check_sizes(a.root, a.max_file_lines, a.max_function_lines)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
