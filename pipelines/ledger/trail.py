"""The artifact trail: what each tool call read, wrote, created, deleted or tested.

Derived from the redacted ``Message.tool_calls`` (tool name + arguments JSON text)
and the results linked to them (``tool_call_id``; status from the
``ToolObservation``, output text from the artifact when given), for every reader
format:

* file editors: SWE-agent ``create``/``open``/``edit``/``insert`` (the windowed
  editor edits the *currently open* file) and ``str_replace_editor``; OpenHands
  ``str_replace_editor``/``edit``/``write``/``read`` actions and IPython helpers
  (``create_file``, ``edit_file_by_replace``, ``open(path, "w")``...); Claude Code
  ``Read``/``Write``/``Edit``/``MultiEdit``/``NotebookEdit``; Anthropic
  ``text_editor``/``memory`` tools;
* shell commands (``bash``, ``execute_bash``, OpenHands ``run``, Claude Code
  ``Bash``...): ``rm``, ``touch``, ``mv``, ``cp``, ``sed -i``, ``tee``, output
  redirection, ``cat``/``head``/``tail`` reads, ``git rm``/``git checkout --``,
  ``cd`` (paths are resolved against the tracked working directory), and test
  runners (pytest, unittest, tox, npm/yarn test, go test, cargo test, make test...);
* generic API tools, by the verb their name starts with (``create_ticket``,
  ``update_reservation_flights``, ``DeleteAccount``, ``get_user_details``,
  ``list_*`` / ``search_*`` reads): the resource is ``api:<tool>`` plus its
  id-like arguments (all scalar arguments for a search or list);
* tools and commands that only look (``Glob``, ``Grep``, ``find_file``,
  ``web_fetch``, shell ``ls`` / ``grep`` / ``find`` / ``curl``): a ``read`` of
  where they looked, so the trail says what a conclusion was based on;
* SWE-agent and mini-swe-agent runs without function calling: the action is the
  last fenced block (or ``<command>``) of the assistant text, its result the next
  message; ``(Current directory: ...)`` lines in observations move the working
  directory.

Outcomes: the observation's status; ``error`` when the result says it failed
(``outcome.verdict``: an exit code, an error line in its place, an editor's
refusal; never a keyword anywhere); ``passed``/``failed`` for test runs whose
output has a pytest/unittest/go/jest style summary.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ctxledger.pipelines.ingest.sources import decode_json
from ctxledger.pipelines.ledger.outcome import parse_test_outcome, verdict
from ctxledger.pipelines.ledger.text import cut, key_fields_map
from ctxledger.schemas.base import canonical_json, content_hash
from ctxledger.schemas.ledger import ArtifactTrailEntry
from ctxledger.schemas.transcript import Message, ToolObservation

TEXT_ACTION_FORMATS = frozenset({"swe_agent", "mini_swe_agent"})
MAX_RESOURCE_CHARS = 240

SHELL_TOOLS = frozenset(
    {
        "bash",
        "execute_bash",
        "run",
        "shell",
        "terminal",
        "run_command",
        "run_shell_command",
        "bash_code_execution",
        "execute_command",
        "sh",
        "cmd",
        "exec",
    }
)
PYTHON_TOOLS = frozenset(
    {
        "run_ipython",
        "execute_ipython_cell",
        "ipython",
        "python",
        "code_execution",
        "python_interpreter",
        "run_python",
    }
)
EDITOR_TOOLS = frozenset(
    {
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "text_editor",
        "text_editor_code_execution",
        "memory",
        "edit_file",
    }
)
SKIP_TOOLS = frozenset(
    {
        "think",
        "finish",
        "submit",
        "todowrite",
        "goto",
        "scroll_up",
        "scroll_down",
        "calculator",
        "calculate",
    }
)
#: Tools that only look: each call is a ``read`` of where it looked (the
#: location argument, else the working directory), with what it looked for
#: in the detail. name -> (location keys, query keys).
LOOK_TOOLS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "glob": (("path",), ("pattern",)),
    "grep": (("path", "file"), ("pattern",)),
    "ls": (("path", "dir", "directory"), ()),
    "list_files": (("path", "dir", "directory"), ()),
    "list_directory": (("path", "dir", "directory"), ()),
    "find_file": (("dir", "path"), ("file_name", "name")),
    "search_file": (("file", "path"), ("search_term",)),
    "search_dir": (("dir", "path"), ("search_term",)),
    "web_fetch": (("url",), ()),
    "fetch": (("url",), ()),
    "browse": (("url",), ()),
    "browser": (("url",), ()),
    "web_search": ((), ("query",)),
}
#: Shell commands that only look (``ls``, ``grep``, ``find``, ``curl``...).
LOOK_COMMANDS = frozenset(
    {"ls", "grep", "egrep", "fgrep", "rg", "find", "curl", "wget", "tree", "stat"}
)
#: Verbs of API tools whose read is described by all their scalar arguments
#: (``search_direct_flight?date=...&origin=DEN``), not only the ids.
QUERY_VERBS = frozenset({"search", "list", "find", "lookup", "query", "check"})
CREATE_VERBS = frozenset(
    "create add new insert register book open post make schedule upload issue".split()
)
WRITE_VERBS = frozenset(
    """update modify edit set change put patch replace rename move transfer record
    append save write send assign approve reset enable disable toggle mark apply
    submit""".split()
)
DELETE_VERBS = frozenset(
    """delete remove cancel drop destroy erase purge unregister revoke
    archive clear""".split()
)
READ_VERBS = frozenset(
    """get read fetch query retrieve view show describe load download list search
    find lookup check count inspect""".split()
)
_ID_KEYS = frozenset(
    {"id", "path", "url", "file", "filename", "key", "code", "reference", "number"}
)

_TEST_COMMAND = re.compile(
    r"^(?:pytest|py\.test|tox|nox|ctest|rspec|jest|vitest|phpunit|mocha)\b"
    r"|^python[\d.]*\s+(?:-m\s+(?:pytest|unittest|nose2?|tox)\b|\S*runtests?\S*)"
    r"|^(?:npm|yarn|pnpm|bun)\s+(?:run\s+)?test\b"
    r"|^(?:go|cargo|mvn|gradle|\./gradlew|dotnet|mix|deno)\s+test\b"
    r"|^make\s+(?:test|tests|check)\b"
    r"|^(?:\./)?\S*runtests?(?:\.\w+)?\b"
    r"|^bundle\s+exec\s+rspec\b"
)
_TEST_TOOL = re.compile(r"(?:^|_)(?:run_?)?tests?(?:$|_)|pytest|unittest", re.I)
_CWD_MARK = re.compile(r"\(Current directory: ([^)\n]+)\)")
_OPEN_FILE_MARK = re.compile(r"\[File: (/[^\s\]]+) \(\d+ lines total\)\]")
_FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
_XML_COMMAND = re.compile(r"<command>\n?(.*?)\n?</command>", re.DOTALL)
# SWE-agent / OpenHands IPython helpers and plain Python file I/O.
_PY_CREATE = re.compile(r"\bcreate_file\(\s*(?:path\s*=\s*)?['\"]([^'\"]+)['\"]")
_PY_WRITE = re.compile(
    r"\b(?:edit_file_by_replace|insert_content_at_line|append_file|edit_file)"
    r"\(\s*(?:file_name\s*=\s*|path\s*=\s*)?['\"]([^'\"]+)['\"]"
)
_PY_READ = re.compile(r"\bopen_file\(\s*(?:path\s*=\s*)?['\"]([^'\"]+)['\"]")
_PY_OPEN = re.compile(
    r"\bopen\(\s*['\"]([^'\"]+)['\"]\s*(?:,\s*(?:mode\s*=\s*)?['\"]([rwxab+t]+)['\"])?"
)
_PY_DELETE = re.compile(r"\bos\.(?:remove|unlink)\(\s*['\"]([^'\"]+)['\"]")


@dataclass(frozen=True)
class Op:
    """One operation a call performed, before it is tied to its message."""

    operation: str
    resource: str
    detail: str = ""
    content_hash: str | None = None


@dataclass
class TrailState:
    """What a session's tools remember between calls."""

    cwd: str | None = None
    current_file: str | None = None


def sha256_text(text: str) -> str:
    """``sha256:<hex>`` of a text's UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def resolve(path: str, cwd: str | None) -> str:
    """``path`` made absolute against ``cwd`` when it is known, normalised."""
    path = path.strip().strip("'\"")
    if not path:
        return path
    if path.startswith("~"):
        return posixpath.normpath(path)
    if not path.startswith("/") and cwd:
        path = posixpath.join(cwd, path)
    return posixpath.normpath(path)


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.lower() for w in re.split(r"[\s_\-.]+", spaced) if w]


def _args(arguments: str) -> dict[str, Any] | None:
    try:
        # decode_json: a nested \udc80 escape must not become a lone surrogate
        # in a resource path (it fails every encoder downstream).
        value = decode_json(arguments) if arguments.strip() else {}
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _str(args: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


# -- shell ---------------------------------------------------------------------
_OPERATORS = {"&&", "||", ";", "|", "&", ";;", "|&"}
_WRAPPERS = {"sudo", "time", "nohup", "env", "command", "exec", "builtin"}


def _tokens(line: str) -> list[str] | None:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:
        return None


def _simple_commands(tokens: list[str]) -> Iterator[list[str]]:
    current: list[str] = []
    for token in tokens:
        if token in _OPERATORS:
            if current:
                yield current
            current = []
        else:
            current.append(token)
    if current:
        yield current


def _heredoc_body(lines: list[str], start: int, delimiter: str) -> tuple[str, int]:
    body = []
    index = start
    while index < len(lines) and lines[index].strip() != delimiter:
        body.append(lines[index])
        index += 1
    return "\n".join(body) + "\n", index + 1


def shell_ops(command: str, state: TrailState) -> list[Op]:
    """Operations of a shell command line (or script); updates ``state.cwd``."""
    ops: list[Op] = []
    lines = command.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.strip():
            continue
        heredoc = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        body = None
        if heredoc:
            body, index = _heredoc_body(lines, index, heredoc.group(1))
            line = line[: heredoc.start()] + line[heredoc.end() :]
        tokens = _tokens(line)
        if tokens is None:
            tokens = line.split()
        for words in _simple_commands(tokens):
            ops.extend(_command_ops(words, state, body))
    return ops


def _split_redirects(words: list[str]) -> tuple[list[str], list[str]]:
    args, targets = [], []
    skip = False
    for i, word in enumerate(words):
        if skip:
            skip = False
            continue
        if word in (">", ">>"):
            if i + 1 < len(words):
                target = words[i + 1]
                if not target.startswith("&") and target != "/dev/null":
                    targets.append(target)
            skip = True
        elif word in ("<", "<<", "<<<"):
            skip = True
        elif re.fullmatch(r"\d?>&?\d*", word) or word in (">&", "<&"):
            continue
        else:
            args.append(word)
    return args, targets


def _command_ops(words: list[str], state: TrailState, body: str | None) -> list[Op]:
    args, targets = _split_redirects(words)
    while args and (re.fullmatch(r"[A-Za-z_]\w*=.*", args[0]) or args[0] in _WRAPPERS):
        args = args[1:]
    if args and args[0] == "timeout" and len(args) > 2:
        args = args[2:]
    ops = [
        Op(
            "write",
            resolve(t, state.cwd),
            "redirect",
            sha256_text(body) if body is not None else None,
        )
        for t in targets
    ]
    if not args:
        return ops
    name = posixpath.basename(args[0])
    rest = args[1:]
    files = [a for a in rest if not a.startswith("-")]
    joined = " ".join(args)
    if _TEST_COMMAND.match(joined):
        return [*ops, Op("test", cut(joined, MAX_RESOURCE_CHARS), name)]
    if name == "cd":
        target = files[0] if files else "~"
        state.cwd = resolve(target, state.cwd) if target != "-" else state.cwd
        return ops
    if name in ("rm", "unlink"):
        return [*ops, *(Op("delete", resolve(f, state.cwd), name) for f in files)]
    if name == "touch":
        return [*ops, *(Op("create", resolve(f, state.cwd), name) for f in files)]
    if name == "mv" and len(files) >= 2:
        src, dst = files[:-1], files[-1]
        return [
            *ops,
            *(Op("delete", resolve(f, state.cwd), "mv") for f in src),
            Op("create", resolve(dst, state.cwd), "mv"),
        ]
    if name == "cp" and len(files) >= 2:
        return [
            *ops,
            *(Op("read", resolve(f, state.cwd), "cp") for f in files[:-1]),
            Op("write", resolve(files[-1], state.cwd), "cp"),
        ]
    if name == "sed":
        in_place = any(a == "-i" or a.startswith(("-i", "--in-place")) for a in rest)
        has_script_opt = any(a in ("-e", "--expression", "-f") for a in rest)
        targets_ = files if has_script_opt else files[1:]
        if "-e" in rest:
            targets_ = [f for f in targets_ if f not in _option_values(rest, "-e")]
        operation = "write" if in_place else "read"
        return [
            *ops,
            *(Op(operation, resolve(f, state.cwd), "sed") for f in targets_),
        ]
    if name == "tee":
        return [*ops, *(Op("write", resolve(f, state.cwd), "tee") for f in files)]
    if name in LOOK_COMMANDS:
        return [*ops, *_look_ops(name, rest, state)]
    if name in ("cat", "head", "tail", "less", "more", "nl", "bat"):
        reads = [f for f in files if not re.fullmatch(r"\+?\d+", f)]
        return [*ops, *(Op("read", resolve(f, state.cwd), name) for f in reads)]
    if name == "git" and rest:
        sub, more = rest[0], [a for a in rest[1:] if not a.startswith("-")]
        if sub == "rm":
            return [
                *ops,
                *(Op("delete", resolve(f, state.cwd), "git rm") for f in more),
            ]
        if sub in ("checkout", "restore") and "--" in rest:
            paths = rest[rest.index("--") + 1 :]
            return [
                *ops,
                *(Op("write", resolve(f, state.cwd), f"git {sub}") for f in paths),
            ]
        return ops
    return [*ops, *_editor_command(args, state)]


def _look_ops(name: str, rest: list[str], state: TrailState) -> list[Op]:
    """Reads of a command that only looks: the paths (or URL) it looked at."""
    words = [a for a in rest if not a.startswith("-")]
    if name == "curl" or name == "wget":
        urls = [w for w in words if re.match(r"^(?:https?|ftp)://|^[\w.-]+:\d+", w)]
        return [Op("read", cut(u, MAX_RESOURCE_CHARS), name) for u in urls[:1]]
    if name in ("grep", "egrep", "fgrep", "rg"):
        has_e = any(a in ("-e", "--regexp", "-f") for a in rest)
        words = words if has_e else words[1:]
        if has_e:
            words = [w for w in words if w not in _option_values(rest, "-e")]
        recursive = name == "rg" or any(
            re.fullmatch(r"-\w*[rR]\w*|--recursive", a) for a in rest
        )
        if not words and not recursive:
            return []  # grep on a pipe reads no file
    elif name == "find":
        words = words[:1]
    paths = words or ["."]
    return [Op("read", resolve(p, state.cwd), name) for p in paths[:4]]


def _look_tool_op(
    tool_name: str, lowered: str, args: Mapping[str, Any], state: TrailState
) -> Op:
    where_keys, what_keys = LOOK_TOOLS[lowered]
    where = _str(args, *where_keys) if where_keys else None
    what = _str(args, *what_keys) if what_keys else None
    detail = cut(f"{tool_name} {what}", 120) if what else tool_name
    if where is None and lowered == "search_file":
        where = state.current_file
    if where is None:
        if not where_keys:  # a web search: the query is what was read
            return Op(
                "read", cut(f"{tool_name}:{what or ''}", MAX_RESOURCE_CHARS), detail
            )
        where = state.cwd or "."
    if re.match(r"^[a-z]+://", where):
        return Op("read", cut(where, MAX_RESOURCE_CHARS), detail)
    return Op("read", resolve(where, state.cwd), detail)


def _option_values(args: list[str], option: str) -> set[str]:
    return {args[i + 1] for i, a in enumerate(args[:-1]) if a == option}


def _editor_command(args: list[str], state: TrailState) -> list[Op]:
    """SWE-agent's editor commands typed as shell commands."""
    name, rest = args[0], args[1:]
    if name == "open" and rest:
        state.current_file = resolve(rest[0], state.cwd)
        return [Op("read", state.current_file, "open")]
    if name == "create" and rest:
        state.current_file = resolve(rest[0], state.cwd)
        return [Op("create", state.current_file, "create")]
    if name in ("edit", "insert", "append") and state.current_file:
        detail = " ".join([name, *rest[:1]])
        return [Op("write", state.current_file, detail)]
    if name == "str_replace_editor" and len(rest) >= 2:
        return _editor_op(rest[0], rest[1], None, state)
    if name in ("find_file", "search_dir") and rest:
        where = rest[1] if len(rest) > 1 else "."
        return [Op("read", resolve(where, state.cwd), f"{name} {rest[0]}")]
    if name == "search_file" and rest:
        target = rest[1] if len(rest) > 1 else state.current_file
        if target:
            return [Op("read", resolve(target, state.cwd), f"search_file {rest[0]}")]
    return []


def _editor_op(
    command: str, path: str, content: str | None, state: TrailState
) -> list[Op]:
    resource = resolve(path, state.cwd)
    if command == "view":
        return [Op("read", resource, "view")]
    if command == "create":
        state.current_file = resource
        return [
            Op("create", resource, "create", sha256_text(content) if content else None)
        ]
    if command in ("str_replace", "insert", "undo_edit", "append", "edit"):
        return [Op("write", resource, command)]
    if command == "delete":
        return [Op("delete", resource, "delete")]
    return []


# -- python --------------------------------------------------------------------
def python_ops(code: str, state: TrailState) -> list[Op]:
    """Operations of an IPython cell: helper calls, file I/O, shell magics."""
    found: list[tuple[int, Op]] = []
    for match in _PY_CREATE.finditer(code):
        found.append(
            (match.start(), Op("create", resolve(match[1], state.cwd), "create_file"))
        )
    for match in _PY_WRITE.finditer(code):
        helper = match[0].split("(", 1)[0]
        found.append((match.start(), Op("write", resolve(match[1], state.cwd), helper)))
    for match in _PY_READ.finditer(code):
        found.append(
            (match.start(), Op("read", resolve(match[1], state.cwd), "open_file"))
        )
    for match in _PY_OPEN.finditer(code):
        mode = match[2] or "r"
        operation = (
            "create" if "x" in mode else "write" if set(mode) & set("wa+") else "read"
        )
        found.append(
            (match.start(), Op(operation, resolve(match[1], state.cwd), "open"))
        )
    for match in _PY_DELETE.finditer(code):
        found.append((match.start(), Op("delete", resolve(match[1], state.cwd), "os")))
    ops = [op for _, op in sorted(found, key=lambda item: item[0])]
    for line in code.splitlines():
        stripped = line.strip()
        if stripped.startswith("!"):
            ops.extend(shell_ops(stripped[1:], state))
    return ops


# -- tool calls ----------------------------------------------------------------
def _api_resource(tool_name: str, args: Mapping[str, Any], query: bool = False) -> str:
    """``api:<tool>`` plus its id-like arguments (every scalar argument for a
    search or list: the query is what identifies what was read)."""
    parts = []
    for key in sorted(args):
        lowered = key.lower()
        if (
            query
            or lowered in _ID_KEYS
            or lowered.endswith(("_id", "id", "_number", "_code"))
        ):
            value = args[key]
            if isinstance(value, str | int) and not isinstance(value, bool):
                parts.append(f"{key}={cut(str(value), 60)}")
    suffix = ("?" + "&".join(parts)) if parts else ""
    return cut(f"api:{tool_name}{suffix}", MAX_RESOURCE_CHARS)


def call_ops(tool_name: str, arguments: str, state: TrailState) -> list[Op]:
    """Operations of one tool call (see the module docstring)."""
    lowered = tool_name.lower()
    args = _args(arguments)
    if lowered in SKIP_TOOLS:
        return []
    if lowered in LOOK_TOOLS and args is not None:
        return [_look_tool_op(tool_name, lowered, args, state)]
    if lowered in SHELL_TOOLS:
        command = (
            _str(args, "command", "cmd", "code") if args is not None else arguments
        )
        return shell_ops(command or "", state)
    if lowered in PYTHON_TOOLS:
        code = (
            _str(args, "code", "command", "source") if args is not None else arguments
        )
        return python_ops(code or "", state)
    if args is None:
        return []
    if lowered in EDITOR_TOOLS:
        command = _str(args, "command") or "edit"
        path = _str(args, "path", "file_path", "filename")
        if not path:
            return []
        content = _str(args, "file_text", "content")
        ops = _editor_op(command, path, content, state)
        new_path = _str(args, "new_path")
        if command == "rename" and new_path:
            ops = [
                Op("delete", resolve(path, state.cwd), "rename"),
                Op("create", resolve(new_path, state.cwd), "rename"),
            ]
        return ops
    return _named_tool_ops(tool_name, lowered, args, state)


def _named_tool_ops(
    tool_name: str, lowered: str, args: dict[str, Any], state: TrailState
) -> list[Op]:
    path = _str(args, "file_path", "path", "filename", "notebook_path", "file")
    content = _str(args, "content", "file_text", "text")
    if lowered == "read" and path:  # Claude Code Read, OpenHands read
        return [Op("read", resolve(path, state.cwd), tool_name)]
    if lowered == "notebookread" and path:
        return [Op("read", resolve(path, state.cwd), tool_name)]
    if lowered == "write" and path:  # Claude Code Write, OpenHands write
        digest = sha256_text(content) if content is not None else None
        return [Op("write", resolve(path, state.cwd), tool_name, digest)]
    if lowered in ("edit", "multiedit", "notebookedit", "insert", "append"):
        if path:  # Claude Code Edit, OpenHands edit action
            command = _str(args, "command")
            if command in ("create", "view"):
                return _editor_op(command, path, content, state)
            return [Op("write", resolve(path, state.cwd), tool_name)]
        if state.current_file:  # SWE-agent edit/insert on the open file
            return [Op("write", state.current_file, lowered)]
        return []
    if lowered == "create" and path:  # SWE-agent create {"filename": ...}
        state.current_file = resolve(path, state.cwd)
        return [Op("create", state.current_file, "create")]
    if lowered == "open" and path:  # SWE-agent open {"path": ...}
        state.current_file = resolve(path, state.cwd)
        return [Op("read", state.current_file, "open")]
    if _TEST_TOOL.search(lowered):
        target = _str(args, "suite", "path", "target", "tests", "test", "file")
        resource = f"{tool_name} {target}" if target else tool_name
        return [Op("test", cut(resource, MAX_RESOURCE_CHARS), tool_name)]
    words = _words(tool_name)
    verb = words[0] if words else ""
    operation = (
        "create"
        if verb in CREATE_VERBS
        else "write"
        if verb in WRITE_VERBS
        else "delete"
        if verb in DELETE_VERBS
        else "read"
        if verb in READ_VERBS
        else None
    )
    if operation is None:
        return []
    digest = (
        sha256_text(canonical_json(args)) if operation in ("create", "write") else None
    )
    query = operation == "read" and verb in QUERY_VERBS
    return [Op(operation, _api_resource(tool_name, args, query), verb, digest)]


@lru_cache(maxsize=8_192)
def text_action(content: str) -> str | None:
    """The action block of a SWE-agent / mini-swe-agent assistant message."""
    for pattern in (_XML_COMMAND, _FENCE):
        matches = pattern.findall(content)
        if matches:
            return matches[-1].strip("\n")
    return None


def text_action_results(messages: Sequence[Message], source_format: str) -> set[str]:
    """Ids of the messages that are the *results* of text actions (SWE-agent and
    mini-swe-agent observations arrive as ``user`` messages): environment output,
    not user statements."""
    if source_format not in TEXT_ACTION_FORMATS:
        return set()
    results: set[str] = set()
    ordered = sorted(messages, key=lambda m: (m.turn, m.message_id))
    for previous, message in zip(ordered, ordered[1:], strict=False):
        if (
            message.role == "user"
            and previous.role == "assistant"
            and not previous.tool_calls
            and text_action(previous.content) is not None
        ):
            results.add(message.message_id)
    return results


def text_action_ops(action: str, state: TrailState) -> list[Op]:
    """Operations of a text action: an editor command line, else a shell script."""
    first, _, _ = action.partition("\n")
    words = _tokens(first) or first.split()
    if words and words[0] in ("edit", "insert", "append", "create", "open"):
        return _editor_command(words, state)
    if words and words[0] in ("str_replace_editor",):
        return _editor_command(words, state)
    if words and words[0] in ("submit", "goto", "scroll_up", "scroll_down"):
        return []
    return shell_ops(action, state)


# -- outcomes ------------------------------------------------------------------
def _outcome(op: Op, status: str | None, output: str | None) -> tuple[str, str | None]:
    """``(outcome, extra detail)`` of one operation."""
    if op.operation == "test":
        parsed = parse_test_outcome(output)
        if parsed is not None:
            return parsed
        return ("failed" if status == "error" else status or "unknown"), None
    if status == "error" or verdict(output).status == "error":
        return "error", None
    return status or "unknown", None


# -- the trail -----------------------------------------------------------------
@dataclass
class _Pending:
    message: Message
    call_id: str | None
    tool_name: str
    ops: list[Op]
    source: str
    index: int
    result: Message | None = None
    result_text: str | None = None
    status: str | None = None
    artifact_ref: str | None = None
    facts: str = ""


_ID_FACT = re.compile(r"(?:^|_)(?:id|ticket|number|reference|ref|code|key)$", re.I)


def _id_facts(key_fields: str) -> str:
    """Id-like scalar facts of a result (``ticket=INC-5512``): what an API call
    created or changed."""
    return cut(
        ", ".join(
            f"{k}={v}"
            for k, v in sorted(key_fields_map(key_fields).items())
            if _ID_FACT.search(k)
            and isinstance(v, str | int)
            and not isinstance(v, bool)
        ),
        120,
    )


@dataclass
class TrailInput:
    """What the trail needs of one session (messages in turn order)."""

    session_id: str
    tenant_id: str
    source_format: str
    messages: Sequence[Message]
    observations: Mapping[str, ToolObservation] = field(default_factory=dict)
    outputs: Mapping[str, str] = field(default_factory=dict)
    run_id: str = ""


def derive_trail(data: TrailInput) -> list[ArtifactTrailEntry]:
    """The artifact trail of one session, in turn order."""
    state = TrailState()
    calls: list[_Pending] = []
    open_calls: dict[str, list[_Pending]] = {}
    waiting_text: _Pending | None = None
    text_format = data.source_format in TEXT_ACTION_FORMATS
    messages = sorted(data.messages, key=lambda m: (m.turn, m.message_id))
    for message in messages:
        # Readers store a text action's observation as an unlinked ``tool``
        # message (older data: a ``user`` one); its text is the raw output.
        observed = (
            data.outputs.get(message.artifact_ref or "", message.content)
            if message.role == "tool" and not message.tool_call_id
            else message.content
        )
        if message.role in ("user", "tool") and text_format:
            _track_directory(observed, state)
        answers_text = waiting_text is not None and (
            message.role == "user"
            or (message.role == "tool" and not message.tool_call_id)
        )
        if message.role == "tool" and not answers_text:
            _link_result(message, data, open_calls)
            continue
        if waiting_text is not None and answers_text:
            waiting_text.result = message
            waiting_text.result_text = observed
            if message.role == "tool":
                waiting_text.artifact_ref = message.artifact_ref
            waiting_text = None
        if message.role != "assistant":
            continue
        waiting_text = None
        for position, call in enumerate(message.tool_calls):
            pending = _Pending(
                message,
                call.call_id,
                call.tool_name,
                call_ops(call.tool_name, call.arguments, state),
                "tool_call",
                position,
            )
            calls.append(pending)
            open_calls.setdefault(call.call_id, []).append(pending)
        if not message.tool_calls and text_format:
            action = text_action(message.content)
            if action is not None:
                pending = _Pending(
                    message,
                    None,
                    cut((action.split() or ["action"])[0], 40),
                    text_action_ops(action, state),
                    "text_action",
                    0,
                )
                calls.append(pending)
                waiting_text = pending
    return [entry for pending in calls for entry in _entries(pending, data)]


def _track_directory(content: str, state: TrailState) -> None:
    marks = _CWD_MARK.findall(content)
    if marks:
        state.cwd = posixpath.normpath(marks[-1].strip())
    opened = _OPEN_FILE_MARK.findall(content)
    if opened:
        state.current_file = posixpath.normpath(opened[-1])


def _link_result(
    message: Message, data: TrailInput, open_calls: dict[str, list[_Pending]]
) -> None:
    queue = open_calls.get(message.tool_call_id or "")
    if not queue:
        return
    pending = queue.pop(0)
    pending.result = message
    observation = data.observations.get(message.message_id)
    pending.status = observation.status if observation else None
    pending.facts = _id_facts(observation.key_fields) if observation else ""
    pending.artifact_ref = message.artifact_ref
    if message.artifact_ref and message.artifact_ref in data.outputs:
        pending.result_text = data.outputs[message.artifact_ref]


def _entries(pending: _Pending, data: TrailInput) -> Iterable[ArtifactTrailEntry]:
    message = pending.message
    for number, op in enumerate(pending.ops):
        outcome, extra = _outcome(op, pending.status, pending.result_text)
        if extra is None and pending.facts and op.resource.startswith("api:"):
            extra = pending.facts if op.operation != "read" else None
        detail = f"{op.detail}: {extra}" if extra else op.detail
        yield ArtifactTrailEntry(
            trail_id=content_hash(
                data.session_id,
                message.message_id,
                pending.call_id,
                pending.index,
                number,
                op.operation,
                op.resource,
                prefix="trl_",
            ),
            tenant_id=data.tenant_id,
            session_id=data.session_id,
            turn=message.turn,
            message_id=message.message_id,
            tool_call_id=pending.call_id,
            tool_name=pending.tool_name,
            operation=op.operation,  # type: ignore[arg-type]
            resource=cut(op.resource, MAX_RESOURCE_CHARS),
            content_hash=op.content_hash,
            outcome=outcome,  # type: ignore[arg-type]
            result_turn=pending.result.turn if pending.result else None,
            artifact_ref=pending.artifact_ref,
            detail=cut(detail, 200),
            source=pending.source,  # type: ignore[arg-type]
            run_id=data.run_id,
        )


def net_changes(trail: Iterable[ArtifactTrailEntry]) -> dict[str, str]:
    """Resource -> last successful change (``write``/``create``/``delete``).

    Reads and test runs are ignored, as are operations whose outcome is ``error``.
    """
    last: dict[str, str] = {}
    for entry in trail:
        if (
            entry.operation in ("write", "create", "delete")
            and entry.outcome != "error"
        ):
            last[entry.resource] = entry.operation
    return last
