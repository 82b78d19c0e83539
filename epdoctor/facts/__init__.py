"""Typed parsers of raw outputs. Input they cannot parse gives an unknown Fact, never a guess."""
