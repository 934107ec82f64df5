"""Runs across time, hosts and models: an index of recordings and the trends it shows.

Owns ``spectui history``'s work: ``index`` keeps a SQLite index of every recording found under
some folders (one row per file: its frozen artifacts and its summary numbers, refreshed by
path, size and mtime), ``trend`` groups the indexed runs into series (host, target, backend,
run label, sampling, prompt), marks every artifact change and flags stale series, ``render``
prints them (text table, plotext charts, JSON). ``labels`` names a run: the one label the
dashboard's header and compare columns show too (the UI imports it from here).

A multi-run layer beside ``lab``, ``compare``, ``telemetry`` and ``report``, which it may not
import: a sweep's floors reach it as plain ``FloorLine`` values from the caller. May import
``watch`` (a watch's recording read back: watches are indexed by server), ``metrics``,
``models``, ``recording``, ``config``, ``format`` and ``errors``; rich and plotext load only
inside the functions that draw.
"""
