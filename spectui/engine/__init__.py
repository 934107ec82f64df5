"""The headless engine: backends, drafters, sampling and the AR / speculative loops.

Nothing under this package imports a UI toolkit; ``tests/unit/test_import_hygiene.py``
keeps it that way.
"""
