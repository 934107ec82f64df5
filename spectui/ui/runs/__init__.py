"""The dashboard's run kinds: one object per kind of run, behind one interface (``RunKind``).

* ``live.SingleRun``: one session on the engine thread (``r``, a restart after a setting).
* ``live.ChatTurn``: one turn of the conversation typed in the composer (``e``).
* ``pairs.SequentialPair``: AR, then speculative, one after the other (``v`` then ``r``); also
  a conversation's turn against its re-run in the other mode. Each run may name its own engine
  service, so a pair can compare two engine sources.
* ``pairs.InterleavedPair``: both at once, one block each in turn on two contexts (``i``).
* ``replay.Replay``: a recording (or a conversation's folder) played back (``o``, ``spectui
  replay``).

Each kind owns its runs: their run ids (taken from the controller, which routes every note to
the kind that took its id), their outboxes and their stop event, and it decides what a note
does to the dashboard (a state, a baseline, the next run of a pair). What a kind may touch of
the controller is ``base.Dashboard``; the controller keeps the settings, the run on screen and
the routing (``spectui.ui.controller``). No Textual here.
"""
