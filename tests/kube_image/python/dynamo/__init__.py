"""Stands in for NVIDIA Dynamo in the Kubernetes emulator's test image (see tests/kube_image/README.md)."""
