"""Document landing folders: find document versions and read their metadata.

The shape is documented in docs/evidence.md. In short, each ``*.md``,
``*.markdown`` or ``*.txt`` file is one version of one document. Its metadata
(``doc_id``, ``tenant``, ``acl``, ``version``, ``effective_date``, ``title``,
``trust``, ``authority``) comes from, first match per field:

1. a sidecar next to it, ``<file>.meta.json`` or ``<file>.meta.yaml``;
2. YAML front matter at the top of the file (between ``---`` lines);
3. a ``versions.json`` manifest in the document's folder or the one above it
   (the shape of the versioned-docs corpora: ``[{document, versions: [{version,
   file, date}]}]``);
4. the file name ``vNN_YYYY-MM-DD[_anything].md``: the folder's name is the
   document (as in the corpora's manifests), ``vNN`` the version, the date its
   effective date;
5. the fallback: the path (without suffix) is the document, the file's
   modification time its effective date and the order of versions.

A sidecar without its file that says ``deleted: true`` is a *tombstone*: it
closes the document's current version at its ``effective_date``.

Files are identified by the sha256 of their bytes plus their sidecar and
manifest entry, and by their ``tenant=``/``subject=`` folders (the landing
identity, ``pipelines.ingest.landing.landing_identity``), so an unchanged file is
never read twice and the same bytes under two tenants are two documents. Only
regular files inside the docs folder are read (docs/landing.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import yaml

from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.landing import (
    NotRegularFileError,
    Refusal,
    check_entry,
    landing_identity,
    read_regular,
    refused_hash,
    tenant_for,
    walk_landing,
)
from ctxledger.schemas.base import canonical_json

SIDECAR_SUFFIXES = (".meta.json", ".meta.yaml", ".meta.yml")
MANIFEST_NAME = "versions.json"
_VERSION_NAME = re.compile(
    r"^v(?P<n>\d+)(?:_(?P<date>\d{4}-\d{2}-\d{2}))?(?:_[^/]*)?$", re.IGNORECASE
)
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?\r?\n)?---[ \t]*(?:\r?\n|\Z)", re.S)
_OUR_KEY = re.compile(
    r"^[ \t]*(?:doc_id|tenant|acl|version|effective_date|trust|authority|deleted)"
    r"[ \t]*:",
    re.MULTILINE,
)
#: Metadata keys we read; anything else in front matter is left alone.
KNOWN_KEYS = frozenset(
    {
        "doc_id",
        "tenant",
        "acl",
        "version",
        "effective_date",
        "title",
        "trust",
        "authority",
        "deleted",
    }
)


class MetadataError(ValueError):
    """Document metadata that cannot be used (a dead letter, never a guess)."""


@dataclass(frozen=True)
class DocItem:
    """One document version (or tombstone) found in a docs folder."""

    path: str | None
    rel_path: str
    file_hash: str
    size_bytes: int
    tenant_id: str
    path_tenant: str | None
    mtime: float
    sidecar: str | None = None
    manifest_entry: dict[str, Any] | None = None
    tombstone: bool = False
    #: A reason code when the file (or its sidecar) must not be read: the
    #: evidence stage turns the item into one dead letter.
    refusal: str | None = None
    refusal_detail: str = ""

    @property
    def landing_id(self) -> str:
        """Tenant folder + subject folder + bytes (``landing_identity``)."""
        return landing_identity(self.rel_path, self.file_hash)


@dataclass
class DocDiscovery:
    """What a scan of a docs folder found."""

    items: list[DocItem] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DocMeta:
    """Resolved metadata of one document version."""

    doc_id: str
    tenant_id: str
    version: str
    version_sort: str
    effective_from: datetime
    acl: tuple[str, ...]
    trust: str
    title: str | None
    authority: float | None
    deleted: bool
    source: str


def _sha256(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def _path_tenant(rel_path: str) -> str | None:
    marker = "\x00none"
    tenant = tenant_for(rel_path, marker)
    return None if tenant == marker else tenant


def _load_manifests(root: Path, skipped: list[str]) -> dict[str, dict[str, Any]]:
    """``versions.json`` entries keyed by the resolved path of their file.

    A manifest that is not a regular file inside ``root`` is never read: it is
    listed in ``skipped`` and only loses its hints. Its ``file`` entries that
    point outside ``root`` are ignored (they could not be read anyway).
    """
    out: dict[str, dict[str, Any]] = {}
    for manifest in sorted(root.rglob(MANIFEST_NAME)):
        if check_entry(manifest, root) is not None:
            skipped.append(manifest.relative_to(root).as_posix())
            continue
        try:
            documents = json.loads(read_regular(manifest).decode("utf-8"))
        except (OSError, ValueError):
            continue  # an unreadable manifest only loses its hints
        if not isinstance(documents, list):
            continue
        for document in documents:
            if not isinstance(document, dict) or "versions" not in document:
                continue
            for version in document.get("versions") or []:
                if not isinstance(version, dict) or "file" not in version:
                    continue
                target = (manifest.parent / str(version["file"])).resolve()
                out[str(target)] = {
                    "doc_id": document.get("document"),
                    "version": version.get("version"),
                    "effective_date": version.get("date"),
                }
    return out


def discover_documents(
    docs: str | Path,
    default_tenant: str,
    suffixes: tuple[str, ...] = (".md", ".markdown", ".txt"),
) -> DocDiscovery:
    """Every document version under ``docs`` (sorted; hidden entries skipped).

    Only regular files inside ``docs`` are read (``check_entry``); a document
    whose file or sidecar is a FIFO, a broken symlink or a symlink out of the
    folder becomes a refused item (a dead letter), read by no one.
    """
    root = Path(docs).resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"docs folder not found: {Path(docs)}")
    found = DocDiscovery()
    manifests = _load_manifests(root, found.skipped)
    wanted = tuple(s.lower() for s in suffixes)
    # One walk of the folder (``walk_landing``: sorted, hidden entries left out,
    # symlinked folders listed, never entered); siblings are looked up by path.
    entries = [(path, rel) for path, rel, _ in walk_landing(root, ())]
    present = {path for path, _ in entries}
    for path, rel in entries:
        name = path.name
        lower = name.lower()
        if lower.endswith(SIDECAR_SUFFIXES):
            suffix = next(s for s in SIDECAR_SUFFIXES if lower.endswith(s))
            if path.with_name(name[: -len(suffix)]) not in present:
                found.items.append(_tombstone(path, rel, default_tenant, root))
            continue
        if lower == MANIFEST_NAME or lower == "license.origin":
            continue
        if not lower.endswith(wanted):
            found.skipped.append(rel)
            continue
        sidecar = next(
            (
                path.with_name(name + suffix)
                for suffix in SIDECAR_SUFFIXES
                if path.with_name(name + suffix) in present
            ),
            None,
        )
        found.items.append(
            _document(path, rel, sidecar, manifests, default_tenant, root)
        )
    return found


def _read_entry(path: Path, root: Path, what: str) -> tuple[bytes, str] | Refusal:
    """``(bytes, resolved path)`` of a regular file inside ``root``, or why not."""
    refusal = check_entry(path, root)
    if refusal is None:
        target = os.path.realpath(path)
        try:
            return read_regular(target), target
        except NotRegularFileError as exc:
            refusal = Refusal(reasons.NOT_REGULAR_FILE, str(exc))
        except OSError as exc:
            refusal = Refusal(reasons.FILE_UNREADABLE, type(exc).__name__)
    if what:
        return Refusal(refusal.reason, f"{what}: {refusal.detail}")
    return refusal


def _refused(rel: str, default_tenant: str, refusal: Refusal) -> DocItem:
    path_tenant = _path_tenant(rel)
    return DocItem(
        path=None,
        rel_path=rel,
        file_hash=refused_hash(rel, refusal),
        size_bytes=0,
        tenant_id=path_tenant or default_tenant,
        path_tenant=path_tenant,
        mtime=0.0,
        refusal=refusal.reason,
        refusal_detail=refusal.detail,
    )


def _document(
    path: Path,
    rel: str,
    sidecar: Path | None,
    manifests: dict[str, dict[str, Any]],
    default_tenant: str,
    root: Path,
) -> DocItem:
    read = _read_entry(path, root, "")
    if isinstance(read, Refusal):
        return _refused(rel, default_tenant, read)
    data, target = read
    extra, sidecar_target = b"", None
    if sidecar is not None:
        side = _read_entry(sidecar, root, "sidecar")
        if isinstance(side, Refusal):
            # Never guess around metadata that may carry the ACL.
            return _refused(rel, default_tenant, side)
        extra, sidecar_target = side
    entry = manifests.get(target)
    path_tenant = _path_tenant(rel)
    return DocItem(
        path=target,
        rel_path=rel,
        file_hash=_sha256(data, extra, canonical_json(entry).encode("utf-8")),
        size_bytes=len(data),
        tenant_id=path_tenant or default_tenant,
        path_tenant=path_tenant,
        mtime=os.stat(target).st_mtime,
        sidecar=sidecar_target,
        manifest_entry=entry,
    )


def _tombstone(path: Path, rel: str, default_tenant: str, root: Path) -> DocItem:
    read = _read_entry(path, root, "")
    if isinstance(read, Refusal):
        return _refused(rel, default_tenant, read)
    data, target = read
    path_tenant = _path_tenant(rel)
    return DocItem(
        path=None,
        rel_path=rel,
        file_hash=_sha256(b"tombstone", data),
        size_bytes=len(data),
        tenant_id=path_tenant or default_tenant,
        path_tenant=path_tenant,
        mtime=os.stat(target).st_mtime,
        sidecar=target,
        tombstone=True,
    )


# --------------------------------------------------------------------- metadata
def split_front_matter(text: str) -> tuple[dict[str, Any], int]:
    """YAML front matter of ``text`` and the offset where the body starts."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, 0
    block = match.group(1) or ""
    try:
        data = yaml.safe_load(block) or {}
    except yaml.YAMLError as exc:
        # Broken front matter written for another tool (a Hugo title) is skipped;
        # one that tries to set our keys (an ACL!) must not be guessed around.
        if _OUR_KEY.search(block):
            raise MetadataError("front matter is not valid YAML") from exc
        return {}, match.end()
    if not isinstance(data, dict):
        raise MetadataError("front matter must be a mapping")
    return data, match.end()


def read_sidecar(path: str) -> dict[str, Any]:
    """A sidecar's mapping (JSON or YAML by suffix; a regular file only)."""
    try:
        raw = read_regular(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MetadataError("sidecar is not UTF-8") from exc
    try:
        if path.lower().endswith(".json"):
            data = json.loads(raw)
        else:
            data = yaml.safe_load(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise MetadataError("sidecar is not valid JSON/YAML") from exc
    if not isinstance(data, dict):
        raise MetadataError("sidecar must be a mapping")
    return data or {}


def parse_when(value: Any) -> datetime:
    """A date or datetime from metadata, as an aware UTC datetime."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime(value.year, value.month, value.day)
    elif isinstance(value, str) and value.strip():
        text = value.strip().replace("Z", "+00:00")
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError as exc:
            # Never echo the value: dead-letter messages name the field only.
            raise MetadataError("effective_date is not an ISO date") from exc
    else:
        raise MetadataError("effective_date must be an ISO date or datetime")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def version_sort_key(version: str) -> str:
    """A string that sorts versions naturally (``v2`` < ``v10``)."""
    return "".join(
        f"{int(part):012d}" if part.isdigit() else part.lower()
        for part in re.split(r"(\d+)", version)
    )


def _acl(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        groups = [g.strip() for g in value.split(",")]
    elif isinstance(value, list | tuple):
        groups = [str(g).strip() for g in value]
    else:
        raise MetadataError("acl must be a list of group names")
    groups = sorted({g for g in groups if g})
    if not groups:
        raise MetadataError("acl lists no group")
    return tuple(groups)


def resolve_metadata(
    item: DocItem,
    front_matter: dict[str, Any],
    sidecar: dict[str, Any],
    default_acl: tuple[str, ...],
    default_trust: str,
    fallback_version: str,
) -> DocMeta:
    """Merge the metadata sources of ``item`` (see the module docstring)."""
    layers: list[tuple[str, dict[str, Any]]] = [
        ("sidecar", {k: v for k, v in sidecar.items() if k in KNOWN_KEYS}),
        ("front_matter", {k: v for k, v in front_matter.items() if k in KNOWN_KEYS}),
        ("manifest", {k: v for k, v in (item.manifest_entry or {}).items() if v}),
    ]
    rel = Path(item.rel_path)
    stem = rel.name
    for suffix in SIDECAR_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    named = _VERSION_NAME.match(stem)
    parent = _strip_tenant(rel.parent.as_posix())
    if named:
        layers.append(
            (
                "file_name",
                {
                    "doc_id": rel.parent.name if parent else stem,
                    "version": f"v{int(named.group('n')):02d}",
                    **(
                        {"effective_date": named.group("date")}
                        if named.group("date")
                        else {}
                    ),
                },
            )
        )
    fallback_id = _strip_tenant((rel.parent / stem).as_posix())
    mtime = datetime.fromtimestamp(item.mtime, tz=UTC)
    layers.append(
        (
            "fallback",
            {
                "doc_id": fallback_id,
                "version": fallback_version,
                "effective_date": mtime,
            },
        )
    )

    def pick(key: str) -> tuple[Any, str | None]:
        for name, layer in layers:
            if layer.get(key) not in (None, ""):
                return layer[key], name
        return None, None

    doc_id, source = pick("doc_id")
    version, _ = pick("version")
    when, _ = pick("effective_date")
    if isinstance(version, int):
        version = f"v{version:02d}"
    tenant_value, _ = pick("tenant")
    tenant = item.tenant_id
    if tenant_value is not None:
        tenant_value = str(tenant_value).strip()
        if item.path_tenant and tenant_value != item.path_tenant:
            raise MetadataError("metadata tenant differs from the tenant= folder")
        tenant = tenant_value or tenant
    acl_value, _ = pick("acl")
    trust, _ = pick("trust")
    trust = str(trust or default_trust)
    if trust not in ("trusted", "untrusted"):
        raise MetadataError("trust must be 'trusted' or 'untrusted'")
    authority, _ = pick("authority")
    if authority is not None:
        try:
            authority = float(authority)
        except (TypeError, ValueError) as exc:
            raise MetadataError("authority must be a number in [0, 1]") from exc
        if not 0.0 <= authority <= 1.0:
            raise MetadataError("authority must be a number in [0, 1]")
    title, _ = pick("title")
    deleted, _ = pick("deleted")
    version = str(version)
    return DocMeta(
        doc_id=str(doc_id),
        tenant_id=tenant,
        version=version,
        version_sort=version_sort_key(version),
        effective_from=parse_when(when),
        acl=_acl(acl_value) if acl_value is not None else tuple(default_acl),
        trust=trust,
        title=str(title) if title is not None else None,
        authority=authority,
        deleted=bool(deleted) or item.tombstone,
        source=source or "fallback",
    )


def _strip_tenant(path: str) -> str:
    parts = [
        p for p in path.split("/") if p not in ("", ".") and not p.startswith("tenant=")
    ]
    return "/".join(parts)
