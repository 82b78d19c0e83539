"""Pure detectors: facts in, coded findings out. See base.py for the conventions."""
