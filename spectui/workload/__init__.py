"""A person's own traffic against warm servers at 1..N clients (``spectui workload``).

Owns: reading a workload (``source``), the load of closed-loop clients or open-loop arrivals
(``clients``), the run over settings and levels with every request recorded and judged against
AR (``run``), the result and its verdicts (``result``), and each setting's engine (``engines``).
May import the layers below it (compare, sessions, runtime, server, engine, recording, ...);
only the command line and the dashboard import it.
"""
