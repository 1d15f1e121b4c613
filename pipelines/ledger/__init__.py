"""The compression ledger: accountable summaries, protected fields, artifact trail.

Pure modules (no Beam): ``text`` (sentences and clause normalisation),
``protected`` (extract, normalise, checksum and find protected fields),
``trail`` (the artifact trail from tool calls in every transcript format),
``sections`` (the anchored summary sections: extract and merge, with one module
per concern: ``cues`` (the lexical cue patterns), ``goal`` (the first real
request, pinned user statements), ``findings`` (assistant conclusions and failed
attempts), ``results`` (tool results' key facts), ``next_steps`` (latest action,
request and confirmations), ``from_trail`` (changed artifacts, sources read,
tests), ``items`` (dedup and caps), ``render`` and ``secret_lines``), ``build``
(windows, merges and rebuild rules -> ``LedgerEntry`` records), ``verify`` (audit
summaries, ours or written elsewhere, against their sources), ``replay`` (context
policies and token buckets) and ``store`` (read a session back from the
warehouse). ``transforms`` holds the ``BuildLedger`` composite.
"""
