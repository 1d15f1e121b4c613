"""The compression ledger: accountable summaries, protected fields, artifact trail.

Pure modules (no Beam): ``text`` (sentences and clause normalisation),
``protected`` (extract, normalise, checksum and find protected fields),
``trail`` (the artifact trail from tool calls in every transcript format),
``sections`` (the anchored summary sections: extract, merge, render), ``build``
(windows, merges and rebuild rules -> ``LedgerEntry`` records), ``verify`` (audit
summaries, ours or written elsewhere, against their sources), ``replay`` (context
policies and token buckets) and ``store`` (read a session back from the
warehouse). ``transforms`` holds the ``BuildLedger`` composite.
"""
