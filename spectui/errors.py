"""The one exception type that reaches the user as a single line (exit code 2)."""


class SpectuiError(Exception):
    """Bad input or an unusable environment, explained in one line.

    The CLI prints ``spectui: error: <message>`` and exits with code 2; nothing else
    in the project should print a traceback for a mistake the user can fix.
    """

    exit_code = 2
