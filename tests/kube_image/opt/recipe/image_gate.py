"""Stand-in for the plan's image gate (probes/image_gate.py): this fake image has nothing to
check, so it says so and passes only when FAKE_IMAGE_GATE_EXIT is unset or 0."""

import os
import sys

print("IMAGE GATE (kube_image stand-in): no real image to check")
sys.exit(int(os.environ.get("FAKE_IMAGE_GATE_EXIT", "0")))
