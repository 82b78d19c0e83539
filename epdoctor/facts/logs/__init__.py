"""Log facts: NCCL, aws-ofi-nccl, DeepEP and engine logs, attributed per rank, streamed.

Modules:

- ``signatures``: the wordings facts are extracted from (NCCL's version, env, provider and
  network lines; context such as vLLM's all2all manager) and ``ANCHORS``, the byte literals of
  the lexicon; ``TRANSPORT_ANCHORS`` adds NCCL's channel lines, read only where asked (the
  launch gates: their logs are small).
- ``triage``: the trouble a line signals, by the catalogue's ``[[log]]`` rules and the lexicon
  (knowledge/): the one table every reader of logs applies.
- ``scanner``: bytes in, candidate lines out (the anchors: the lexicon's and one per rule whose
  lines hold none of those; a block that only repeats lines read before is skipped whole). ``scan_block`` finds anchors (memchr on a rare byte, else ``bytes.find``)
  over 2 MiB blocks and returns only the lines around hits, with line numbers;
  ``Feeder.feed(bytes)`` / ``close()`` do it incrementally with a bounded carry. Reading files,
  ``-`` (stdin) and ``.gz`` (two processes for a large regular file) is
  ``epdoctor.targets.logstream.iter_path``: only bytes reach this package.
- ``prefix``: ``parse_line(text)`` strips ANSI/CR/timestamps, peels launcher prefixes
  (kubectl ``[pod/P/C]``, stern ``POD CONTAINER``, torchrun ``[rankN]:``/``[defaultN]:``, srun
  ``N: ``, mpirun ``[1,N]<stdout>:``, vLLM ``(Worker_DP3_EP3 pid=N)``) into labels and finds
  NCCL's ``host:pid:tid [dev]``.
- ``model``: ``LogFacts.add(source, line_no, raw)`` builds ``RankFacts`` (one per NCCL
  process ``host:pid``; label-only lines join the rank their label or pid maps to) and
  ``Event`` objects (one per recognised message, with its line for evidence).

The analyzer that turns these into findings is ``epdoctor.logwatch`` (judging in
``epdoctor.checks.logs``; free of rich and textual, used by ``epdoctor logs``, diagnose ``--log``, the launcher and the
TUI log panes)::

    from epdoctor.model import Context
    from epdoctor.logwatch import LogAnalyzer, analyze_stream, analyze_paths

    an = LogAnalyzer(Context(instance="p5en.48xlarge", transport="gin-proxy"), source="node0")
    new = an.feed(chunk)          # -> list[Finding] that became true with this chunk
    new += an.finish()            # end of stream: last line, PASS and UNKNOWN verdicts
    an.ranks()                    # -> list[RankFacts] so far
    an.findings()                 # -> every finding, aggregated over ranks

    a = analyze_stream(chunks, ctx)            # -> LogAnalysis (.ranks, .findings, .to_json())
    a = analyze_paths(["a.log", "b.log.gz", "-"], ctx)

``LogAnalyzer(ctx, transports=True)`` also fills ``RankFacts.transports`` from the channel lines;
``feed(chunk, source=...)`` takes interleaved streams, each with its own partial line.

``ctx.options["expect_nics"]`` overrides the instance's EFA count. A finding that needs the
whole log (PASS, or UNKNOWN for "could not see") is only returned by ``finish()``; a failure
is returned by the ``feed`` whose bytes completed its line.
"""
