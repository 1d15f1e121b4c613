"""``ctxledger eval``: run context-builder cases against a warehouse, and
ablate / perturb them.

For each case (``serving.context_checks``) the runner offers the catalogue's
tools (kind ``tool`` items, their definitions' tokens taken from the window),
packs evidence with ``serving.evidence_pack.pack_context`` under the case
set's source registry, confirms each selected item's scope in the warehouse,
and runs the checks (plus ``fixture``: a case's planted span must be in
an item the pack weighed, or the case fails). Ablations re-run the set under
a changed registry or time: (a) each source removed (invalidated) in turn,
(b) each required document replaced by the version before it (``as_of`` just before the
required version took effect: was the stale version caught?), (c) the
required evidence moved to the first / middle / last place of the pack, (d)
near-duplicate distractors added (each invalidated source restored).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ctxledger.pipelines.evidence.envelope import unwrap
from ctxledger.schemas.evidence import ContextItem, ContextManifest, PackRequest
from ctxledger.schemas.sources import SourceRegistry, load_registry
from ctxledger.serving.context_checks import (
    CheckResult,
    EvalCase,
    EvidenceRef,
    ToolSpec,
    check_case,
    load_cases,
    load_tools,
    matches_ref,
    tool_items,
)

if TYPE_CHECKING:
    from ctxledger.schemas.policy import Policy
    from ctxledger.warehouse.catalog import Warehouse

#: Cosine of the query to a tool's name and description needed to offer it.
TOOL_MIN_RELEVANCE = 0.3
#: Drop reasons of items the pack never weighed (their source was removed).
SOURCE_REMOVED = frozenset({"source_invalidated", "source_expired"})


class CaseResult(BaseModel):
    """One case's verdict, checks, tokens and what was offered."""

    name: str
    passed: bool
    checks: list[CheckResult]
    evidence_tokens: int
    tool_tokens: int
    selected: list[str]
    #: The source of each selected item, in order (``schemas.sources``).
    selected_sources: list[str | None] = Field(default_factory=list)
    tools: list[str]
    required_positions: list[int] = Field(default_factory=list)
    manifest_id: str


class EvalReport(BaseModel):
    """A run of a case set: per case results and the totals."""

    cases_file: str
    registry_version: str
    label: str = "baseline"
    results: list[CaseResult]

    @property
    def passed(self) -> int:
        """Cases that passed."""
        return sum(r.passed for r in self.results)

    @property
    def pass_rate(self) -> float:
        """Share of cases that passed (1.0 for an empty set)."""
        return self.passed / len(self.results) if self.results else 1.0

    @property
    def tokens(self) -> int:
        """Tokens offered over all cases (evidence plus tool definitions)."""
        return sum(r.evidence_tokens + r.tool_tokens for r in self.results)


class CaseSet(BaseModel):
    """Cases with their tool catalogue and source registry."""

    model_config = {"arbitrary_types_allowed": True}

    path: Path
    cases: list[EvalCase]
    tools: list[ToolSpec]
    registry: SourceRegistry | None = None


def load_case_set(
    cases: str | Path,
    tools: str | Path | None = None,
    registry: str | Path | None = None,
) -> CaseSet:
    """Cases, plus ``tools.yaml`` / ``sources.yaml`` beside them by default."""
    path = Path(cases)
    tools_path = Path(tools) if tools else path.parent / "tools.yaml"
    registry_path = Path(registry) if registry else path.parent / "sources.yaml"
    return CaseSet(
        path=path,
        cases=load_cases(path),
        tools=load_tools(tools_path) if tools_path.exists() else [],
        registry=load_registry(registry_path) if registry_path.exists() else None,
    )


# ----------------------------------------------------------------- lookups
def _scope(
    wh: Warehouse, case: EvalCase, items: Sequence[ContextItem], policy: Policy
) -> dict[str, str | None]:
    """Per selected item: None when its rows are in the case's scope, else why."""
    ids = sorted({c for i in items for c in i.chunk_ids})
    rows: dict[str, tuple[Any, ...]] = {}
    if ids:
        for chunk_id, tenant, acl, kind, subject in (
            wh.connection()
            .execute(
                "SELECT chunk_id, tenant_id, acl, kind, subject_id "
                "FROM evidence_chunks WHERE list_contains(?, chunk_id)",
                [ids],
            )
            .fetchall()
        ):
            rows[chunk_id] = (tenant, acl, kind, subject)
    operators = set(policy.evidence.artifacts.operator_groups)
    groups = set(case.principal_groups)
    out: dict[str, str | None] = {}
    for item in items:
        why = None
        for chunk_id in item.chunk_ids:
            if chunk_id not in rows:
                why = f"chunk {chunk_id} not in the warehouse"
                break
            tenant, acl, kind, subject = rows[chunk_id]
            if tenant != case.tenant:
                why = f"tenant {tenant}"
            elif kind == "tool_artifact":
                if subject != case.subject_id and not operators & groups:
                    why = "another subject's tool output"
            elif "*" not in (acl or []) and not set(acl or []) & groups:
                why = f"acl {sorted(acl or [])}"
            if why:
                break
        out[item.item_id] = why
    return out


def _newer(wh: Warehouse, case: EvalCase, at: datetime) -> dict[str, str]:
    """Per required ``doc@version``: the version in effect at ``at`` when a
    later one replaced it."""
    out: dict[str, str] = {}
    con = wh.connection()
    for raw in case.required_evidence:
        ref = EvidenceRef.parse(raw)
        if not ref.version:
            continue
        rows = con.execute(
            "SELECT version, effective_from, deleted FROM documents "
            "WHERE tenant_id = ? AND doc_id = ? AND kind = 'document' "
            "ORDER BY effective_from, version_sort",
            [case.tenant, ref.doc_id],
        ).fetchall()
        mine = [r for r in rows if r[0] == ref.version]
        if not mine:
            continue
        later = [r for r in rows if r[1] > mine[0][1] and r[1] <= at]
        if later:
            last = later[-1]
            out[f"{ref.doc_id}@{ref.version}"] = (
                f"{last[0]} (deleted)" if last[2] else last[0]
            )
    return out


def version_before(wh: Warehouse, case: EvalCase, ref: EvidenceRef) -> datetime | None:
    """The instant just before ``ref``'s version took effect (None: unknown)."""
    row = (
        wh.connection()
        .execute(
            "SELECT min(effective_from) FROM documents WHERE tenant_id = ? "
            "AND doc_id = ? AND version = ?",
            [case.tenant, ref.doc_id, ref.version],
        )
        .fetchone()
    )
    if row is None or row[0] is None:
        return None
    when = row[0] if row[0].tzinfo else row[0].replace(tzinfo=UTC)
    return when - timedelta(microseconds=1)


# ----------------------------------------------------------------- fixture
def _plain(item: ContextItem) -> str:
    """An item's text out of its data envelope, lower case, spaces folded."""
    try:
        text = str(unwrap(item.content).get("text", ""))
    except (ValueError, TypeError):
        text = item.content
    return " ".join(text.lower().split())


def fixture_check(case: EvalCase, manifest: ContextManifest) -> CheckResult | None:
    """Whether the text a case plants (``fixture``'s quoted spans) was there to
    be judged: in a selected item, or in one the pack weighed and dropped. A
    case whose fixture is absent (its document not ingested, its source
    removed) tested nothing, so it fails (``fixture``) instead of passing
    because nothing injected reached the pack. None: the case plants nothing.
    """
    if case.fixture is None:
        return None
    spans = case.injected_spans
    if not spans:
        return CheckResult(
            check="fixture",
            passed=False,
            reason='fixture quotes no span to look for (write it in "...")',
        )
    weighed = [_plain(i) for i in manifest.selected] + [
        _plain(d.item)
        for d in manifest.dropped
        if d.item is not None and d.reason not in SOURCE_REMOVED
    ]
    absent = [
        s for s in spans if not any(" ".join(s.lower().split()) in t for t in weighed)
    ]
    return CheckResult(
        check="fixture",
        passed=not absent,
        reason="; ".join(
            f'fixture absent: "{s}" is in no item the pack weighed' for s in absent
        ),
    )


# -------------------------------------------------------------------- run
def run_case(
    wh: Warehouse,
    case: EvalCase,
    tools: Sequence[ToolSpec],
    policy: Policy,
    registry: SourceRegistry,
    *,
    as_of: datetime | None = None,
    reorder: str | None = None,
) -> tuple[CaseResult, ContextManifest]:
    """Offer tools, pack, check one case. ``reorder``: move the required
    evidence to ``first`` / ``middle`` / ``last`` before checking."""
    from ctxledger.serving.evidence_pack import pack_context  # noqa: PLC0415
    from ctxledger.warehouse.evidence_api import embedder  # noqa: PLC0415

    model = embedder(policy.evidence.embedding)

    def relevance(query: str, texts: list[str]) -> list[float]:
        vectors = model.encode([query, *texts])
        return [float(vectors[0] @ v) for v in vectors[1:]]

    now = datetime.now(UTC)
    offered, _ = tool_items(tools, case, relevance, TOOL_MIN_RELEVANCE, now)
    tool_tokens = sum(t.token_count for t in offered)
    at = as_of or case.as_of
    manifest = pack_context(
        wh,
        PackRequest(
            tenant_id=case.tenant,
            subject_id=case.subject_id,
            purpose=case.purpose,
            principal_groups=list(case.principal_groups),
            query=case.input,
            window_tokens=case.window_tokens,
            max_output_tokens=case.max_output_tokens,
            overhead_tokens=min(tool_tokens, case.window_tokens),
            as_of=at,
            now=now,
            include_memories=bool(case.subject_id and case.purpose),
            # a required section that was dropped is explained by its headings
            include_dropped_content=True,
        ),
        policy,
        registry=registry,
    )
    refs = [EvidenceRef.parse(r) for r in case.required_evidence]

    def required(item: ContextItem) -> bool:
        return any(matches_ref(ref, item) for ref in refs)

    if reorder:
        keep = [i for i in manifest.selected if not required(i)]
        moved = [i for i in manifest.selected if required(i)]
        place = {"first": 0, "middle": len(keep) // 2, "last": len(keep)}[reorder]
        manifest = manifest.model_copy(
            update={"selected": keep[:place] + moved + keep[place:]}
        )
    positions = [n for n, i in enumerate(manifest.selected) if required(i)]
    checks = check_case(
        case,
        manifest,
        offered,
        _scope(wh, case, manifest.selected, policy),
        _newer(wh, case, at or now),
    )
    planted = fixture_check(case, manifest)
    if planted is not None:
        checks.append(planted)
    return (
        CaseResult(
            name=case.name,
            passed=all(c.passed for c in checks),
            checks=checks,
            evidence_tokens=manifest.used_tokens,
            tool_tokens=tool_tokens,
            selected=[i.item_id for i in manifest.selected],
            selected_sources=[i.source_id for i in manifest.selected],
            tools=[t.item_id.removeprefix("tool:") for t in offered],
            required_positions=positions,
            manifest_id=manifest.manifest_id,
        ),
        manifest,
    )


def run_cases(
    wh: Warehouse,
    case_set: CaseSet,
    policy: Policy,
    registry: SourceRegistry | None = None,
    label: str = "baseline",
    **kwargs: Any,
) -> EvalReport:
    """Every case of ``case_set`` (see ``run_case``)."""
    from ctxledger.warehouse.sources import active_registry  # noqa: PLC0415

    registry = registry or case_set.registry or active_registry(wh, policy)
    results = [
        run_case(wh, case, case_set.tools, policy, registry, **kwargs)[0]
        for case in case_set.cases
    ]
    return EvalReport(
        cases_file=str(case_set.path),
        registry_version=registry.registry_version,
        label=label,
        results=results,
    )


# --------------------------------------------------------------- ablation
class AblationRow(BaseModel):
    """One perturbation against the baseline."""

    perturbation: str
    target: str
    pass_rate: float
    pass_rate_delta: float
    tokens: int
    tokens_delta: int
    turned_red: list[str]
    turned_green: list[str]
    note: str = ""


def _with_source(registry: SourceRegistry, source_id: str, invalidated: bool):
    """``registry`` with ``source_id`` (in)validated: a new model, so its
    cached lookups and version are rebuilt."""
    data = registry.model_dump()
    for spec in data["sources"]:
        if spec["source_id"] == source_id:
            spec["invalidated"] = invalidated
    return SourceRegistry.model_validate(data)


def _row(kind: str, target: str, base: EvalReport, run: EvalReport, note: str = ""):
    before = {r.name: r.passed for r in base.results}
    after = {r.name: r.passed for r in run.results}
    return AblationRow(
        perturbation=kind,
        target=target,
        pass_rate=round(run.pass_rate, 4),
        pass_rate_delta=round(run.pass_rate - base.pass_rate, 4),
        tokens=run.tokens,
        tokens_delta=run.tokens - base.tokens,
        turned_red=sorted(n for n in after if before.get(n) and not after[n]),
        turned_green=sorted(n for n in after if not before.get(n, True) and after[n]),
        note=note,
    )


def ablate(
    wh: Warehouse, case_set: CaseSet, policy: Policy
) -> tuple[EvalReport, list[AblationRow]]:
    """The baseline and one row per perturbation (module docstring)."""
    from ctxledger.warehouse.sources import active_registry  # noqa: PLC0415

    registry = case_set.registry or active_registry(wh, policy)
    base = run_cases(wh, case_set, policy, registry)
    rows: list[AblationRow] = []
    for spec in registry.sources:  # (a) remove one source at a time
        if spec.invalidated:
            continue
        run = run_cases(
            wh, case_set, policy, _with_source(registry, spec.source_id, True)
        )
        rows.append(_row("remove_source", spec.source_id, base, run))
    for case in case_set.cases:  # (b) the stale version of each required doc
        for raw in case.required_evidence:
            ref = EvidenceRef.parse(raw)
            before = version_before(wh, case, ref) if ref.version else None
            if before is None:
                continue
            one = CaseSet(path=case_set.path, cases=[case], tools=case_set.tools)
            run = run_cases(wh, one, policy, registry, as_of=before)
            base_one = EvalReport(
                cases_file=base.cases_file,
                registry_version=base.registry_version,
                results=[r for r in base.results if r.name == case.name],
            )
            result = run.results[0]
            failed = next(c for c in result.checks if c.check == "required_evidence")
            caught = not failed.passed
            rows.append(
                _row(
                    "stale_version",
                    f"{case.name}: {ref.doc_id} before {ref.version}",
                    base_one,
                    run,
                    ("stale version caught: " + failed.reason)
                    if caught
                    else "stale version NOT caught",
                )
            )
    for place in ("first", "middle", "last"):  # (c) position of the evidence
        run = run_cases(wh, case_set, policy, registry, reorder=place)
        where = ", ".join(
            f"{r.name}@{r.required_positions}"
            for r in run.results
            if r.required_positions
        )
        rows.append(
            _row(
                "evidence_position",
                place,
                base,
                run,
                f"required evidence at {where or 'n/a'}; checks are position-free",
            )
        )
    for spec in registry.sources:  # (d) near-duplicate distractors restored
        if not spec.invalidated:
            continue
        run = run_cases(
            wh, case_set, policy, _with_source(registry, spec.source_id, False)
        )
        let_in = sum(r.selected_sources.count(spec.source_id) for r in run.results)
        rows.append(
            _row(
                "near_duplicate_distractors",
                spec.source_id,
                base,
                run,
                f"{let_in} distractor item(s) selected",
            )
        )
    return base, rows


# ---------------------------------------------------------------- output
def report_json(report: EvalReport, rows: list[AblationRow] | None = None) -> str:
    """The run (and ablation rows) as JSON."""
    data: dict[str, Any] = json.loads(report.model_dump_json())
    data["passed"] = report.passed
    data["failed"] = len(report.results) - report.passed
    data["pass_rate"] = report.pass_rate
    if rows is not None:
        data["ablations"] = [r.model_dump() for r in rows]
    return json.dumps(data, indent=2, sort_keys=True)


def ablation_html(report: EvalReport, rows: list[AblationRow]) -> str:
    """A standalone HTML page of the baseline and the ablation table."""
    e = html.escape
    head = "<tr><th>case</th><th>result</th><th>checks</th><th>tokens</th></tr>"
    cases = "".join(
        f"<tr class={'ok' if r.passed else 'bad'}><td>{e(r.name)}</td>"
        f"<td>{'pass' if r.passed else 'FAIL'}</td><td>"
        + "<br>".join(
            e(f"{c.check}: {'ok' if c.passed else 'FAIL ' + c.reason}")
            for c in r.checks
        )
        + f"</td><td>{r.evidence_tokens + r.tool_tokens}</td></tr>"
        for r in report.results
    )
    ablations = "".join(
        f"<tr class={'bad' if r.turned_red else 'ok'}><td>{e(r.perturbation)}</td>"
        f"<td>{e(r.target)}</td><td>{r.pass_rate:.2f} ({r.pass_rate_delta:+.2f})</td>"
        f"<td>{r.tokens} ({r.tokens_delta:+d})</td>"
        f"<td>{e(', '.join(r.turned_red))}</td>"
        f"<td>{e(r.note)}</td></tr>"
        for r in rows
    )
    return (
        "<!doctype html><html><head><meta charset=utf-8>"
        "<title>ctxledger eval ablations</title><style>"
        "body{font-family:sans-serif}td,th{border:1px solid #ccc;padding:4px;"
        "vertical-align:top}table{border-collapse:collapse}.bad{background:#fdd}"
        ".ok{background:#efe}</style></head><body>"
        f"<h1>Context evaluation: {e(report.cases_file)}</h1>"
        f"<p>registry {e(report.registry_version)}; pass rate "
        f"{report.pass_rate:.2f}; tokens {report.tokens}</p>"
        f"<table>{head}{cases}</table><h2>Ablations and perturbations</h2>"
        "<table><tr><th>perturbation</th><th>target</th><th>pass rate</th>"
        "<th>tokens</th><th>turned red</th><th>note</th></tr>"
        f"{ablations}</table></body></html>"
    )


def write_outputs(
    out: Path, report: EvalReport, rows: list[AblationRow] | None
) -> list[Path]:
    """``eval.json`` (and ``ablation.html``) under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "eval.json"]
    written[0].write_text(report_json(report, rows), encoding="utf-8")
    if rows is not None:
        page = out / "ablation.html"
        page.write_text(ablation_html(report, rows), encoding="utf-8")
        written.append(page)
    return written


__all__ = [
    "AblationRow",
    "CaseResult",
    "CaseSet",
    "EvalReport",
    "ablate",
    "ablation_html",
    "load_case_set",
    "report_json",
    "run_case",
    "run_cases",
    "write_outputs",
]
