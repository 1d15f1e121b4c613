"""Beam wrapper of the ingest stage: landing files in, draft sessions out.

Thin by design: the logic lives in ``landing`` and the readers. Outputs:
``sessions`` (main: ``(LandingItem, DraftSession)``), ``dead_letter``
(``DeadLetter``) and ``landing_file`` (``LandingFile``, with the stage's counts).
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics

from ctxledger.pipelines.config import JobConfig
from ctxledger.pipelines.ingest import reasons
from ctxledger.pipelines.ingest.landing import (
    LandingItem,
    parse_landing_file,
    write_quarantine,
)
from ctxledger.pipelines.ingest.normalize import SourceInfo, dead_letter
from ctxledger.pipelines.timing import timed
from ctxledger.schemas import LandingFile

DEAD_LETTER = "dead_letter"
LANDING_FILE = "landing_file"


def source_info(
    item: LandingItem, config: JobConfig, subject_key: str = "subject_id"
) -> SourceInfo:
    return SourceInfo(
        tenant_id=item.tenant_id,
        source_file=item.rel_path,
        source_hash=item.file_hash,
        run_id=config.run_id,
        policy_version=config.policy_version,
        job_version=config.code_version,
        subject_key=subject_key,
    )


@timed("ingest")
class ParseLandingFileFn(beam.DoFn):
    """Parse one landing file; every record ends as a session or a dead letter."""

    def __init__(self, config: JobConfig, subject_key: str = "subject_id"):
        self.config = config
        self.subject_key = subject_key
        self.files = Metrics.counter("ingest", "files")
        self.dead = Metrics.counter("ingest", "dead_letters")

    def process(self, item: LandingItem):
        parsed = parse_landing_file(
            item,
            self.config.source_format,
            self.config.max_record_bytes,
            subject_key=self.subject_key,
        )
        info = source_info(item, self.config, self.subject_key)
        status = "processed"
        for rejected in parsed.rejected:
            if rejected.reason_code == reasons.FILE_CHANGED:
                status = "changed"
            elif rejected.reason_code == reasons.FILE_UNREADABLE:
                status = "unreadable"
            ref = (
                write_quarantine(
                    self.config.warehouse, self.config.run_id, rejected.raw
                )
                if rejected.raw
                else None
            )
            stage = "ingest" if rejected.records else "validate"
            self.dead.inc()
            yield pvalue.TaggedOutput(
                DEAD_LETTER,
                dead_letter(
                    info,
                    stage,
                    rejected.source_offset,
                    rejected.reason_code,
                    rejected.detail,
                    ref,
                ),
            )
        for session in parsed.sessions:
            yield (item, session)
        self.files.inc()
        yield pvalue.TaggedOutput(
            LANDING_FILE,
            LandingFile(
                file_hash=item.file_hash,
                path=item.rel_path,
                tenant_id=item.tenant_id,
                size_bytes=item.size_bytes,
                source_format=parsed.source_format,
                status=status,
                records_in=parsed.records_in,
                records_out=parsed.records_out,
                dead=parsed.records_dead,
                messages_parsed=parsed.messages_parsed,
                run_id=self.config.run_id,
            ),
        )


def _grouped_files(element):
    """``(key, items)`` of ``SpreadFiles`` -> the items."""
    _key, items = element
    yield from items


class IngestTranscripts(beam.PTransform):
    """Landing items -> ``sessions``, ``dead_letter``, ``landing_file`` outputs.

    ``subject_key``: the policy's ``memory.subject_metadata_key`` (the canonical
    reader splits a session id that names two subjects by it).

    ``items`` are plain ``LandingItem`` s, reshuffled so that parsing does not
    fuse with the listing (one bundle); or, with ``spread=True``, ``(key,
    item)`` pairs from ``pipelines.ingest.spread.spread_files``, grouped by
    that key instead (files balanced by bytes between local workers)."""

    def __init__(
        self, config: JobConfig, subject_key: str = "subject_id", spread: bool = False
    ):
        super().__init__()
        self.config = config
        self.subject_key = subject_key
        self.spread = spread

    def expand(self, items):
        if self.spread:
            files = (
                items
                | "SpreadFiles" >> beam.GroupByKey()
                | "UnkeyFiles" >> beam.FlatMap(_grouped_files)
            )
        else:
            files = items | "ReshuffleFiles" >> beam.Reshuffle()
        return files | "ParseLandingFiles" >> beam.ParDo(
            ParseLandingFileFn(self.config, self.subject_key)
        ).with_outputs(DEAD_LETTER, LANDING_FILE, main="sessions")
