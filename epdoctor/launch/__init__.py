"""Launch and verify: kernel tests, serve, smoke request and benchmark (headless).

Nothing here draws to a terminal: the `epdoctor run` command and the TUI both
drive these modules and render what they report. Every process is started
through a Node (launcher.py), which gives it its own log file and process
group, follows its output as bytes, and can stop everything it started.
"""
