"""Where a probe runs: local host, SSH host, Kubernetes pod, or a saved bundle.

All targets share one interface (base.Target): run the node probe once and
return its raw output, plus read logs. Transport clients are imported only by
the module that needs them.
"""
