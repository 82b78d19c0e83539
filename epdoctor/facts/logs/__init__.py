"""Log facts: NCCL, aws-ofi-nccl, DeepEP and engine logs, per rank, streamed.

Layers:
- ``scan``: the byte-level prefilter (``ChunkScanner.feed(bytes) -> [(lineno, line)]``):
  rare literals found with ``bytes.find`` over large blocks; only those lines are decoded.
- ``prefix``: who wrote a line (``attribute(text)``): kubectl/stern/srun/mpirun/torchrun/vLLM
  prefixes, then NCCL's ``host:pid:tid [dev]``; ANSI colour, CR and timestamps removed.
- ``parse``: ``LogParser`` turns candidate lines into ``RankFacts`` (one per process) and
  ``Event`` objects (one per recognised upstream message).
- ``read``: ``iter_path(path, workers=2)`` (regular files split on line boundaries over worker
  processes, merged in order; ``.gz`` streamed) and ``iter_stream(binary_file)``.

Findings are raised from these in ``epdoctor.checks.logs`` (``LogAnalyzer``, ``analyze_stream``).
"""

from epdoctor.facts.logs.model import Event, LogLine, RankFacts
from epdoctor.facts.logs.parse import LogParser
from epdoctor.facts.logs.scan import LITERALS, ChunkScanner

__all__ = ["LITERALS", "ChunkScanner", "Event", "LogLine", "LogParser", "RankFacts"]
