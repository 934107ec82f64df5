"""spectui: measure whether speculative decoding helps on this machine, and prove it is exact."""

__version__ = "0.1.0"
