"""The lab: long and many-run experiments on the engine (sweeps, soaks), headless."""
