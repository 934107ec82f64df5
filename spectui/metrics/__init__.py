"""Statistics computed from events only, so live runs, replays and diffs agree."""
