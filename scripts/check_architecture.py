#!/usr/bin/env python3
"""Checks docs/architecture.md's dependency table against the build.

Every library and executable the build defines outside tests/ and bench/ must have a row,
and a row's "links" column must name exactly the Loom targets its target_link_libraries
lines link (every line for that target, conditional ones included). Libraries outside
Loom (Qt, SQLite, MPI, ...) are not checked. Run by CTest (test_architecture_links).

usage: check_architecture.py [SOURCE_DIR]
"""
import pathlib
import re
import sys

SKIPPED_DIRS = ("tests", "bench", "build", ".git")
LOOM_TARGET = re.compile(r"^loom([_-][A-Za-z0-9_-]+)?$")


def cmake_files(root):
    yield from (root / "cmake").glob("*.cmake")
    for path in root.rglob("CMakeLists.txt"):
        parts = path.relative_to(root).parts
        if parts[0] in SKIPPED_DIRS or parts[0].startswith("build") or parts[0].startswith("wt-"):
            continue
        yield path


def strip_comments(text):
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def calls(text, command):
    """The argument lists of every `command(...)` in a CMake file (no nested parentheses
    other than generator expressions, which are dropped)."""
    for match in re.finditer(r"\b" + command + r"\s*\(", text):
        depth, i = 1, match.end()
        while depth and i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        body = re.sub(r"\$<[^>]*>", " ", text[match.end():i - 1])
        yield body.split()


def build_graph(root):
    defined, links = set(), {}
    for path in cmake_files(root):
        text = strip_comments(path.read_text())
        for command in ("add_library", "add_executable"):
            for args in calls(text, command):
                if args and LOOM_TARGET.match(args[0]):
                    defined.add(args[0])
        for args in calls(text, "target_link_libraries"):
            if args and LOOM_TARGET.match(args[0]):
                named = {a for a in args[1:] if LOOM_TARGET.match(a)}
                links.setdefault(args[0], set()).update(named)
    return defined, links


def table_rows(doc):
    """(targets, linked) for each row of the first table: the targets are the backticked
    names of the first column, the links those of the third."""
    rows, in_table = [], False
    for line in doc.splitlines():
        if line.startswith("| target |"):
            in_table = True
            continue
        if in_table and not line.startswith("|"):
            break
        if not in_table or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        targets = re.findall(r"`([^`]+)`", cells[0])
        linked = {n for n in re.findall(r"`([^`]+)`", cells[2]) if LOOM_TARGET.match(n)}
        rows.append((targets, linked))
    return rows


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    defined, links = build_graph(root)
    rows = table_rows((root / "docs" / "architecture.md").read_text())
    problems, documented = [], set()
    for targets, linked in rows:
        for target in targets:
            documented.add(target)
            if target not in defined:
                problems.append(f"{target}: in docs/architecture.md but not defined by the build")
                continue
            built = links.get(target, set())
            if built != linked:
                missing = ", ".join(sorted(built - linked)) or "-"
                extra = ", ".join(sorted(linked - built)) or "-"
                problems.append(f"{target}: the build links but the table omits: {missing}; "
                                f"the table names but the build does not link: {extra}")
    for target in sorted(defined - documented):
        problems.append(f"{target}: defined by the build but has no row in docs/architecture.md")
    for p in problems:
        print("architecture:", p)
    print(f"architecture: {len(documented)} targets checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
