"""Scripts that run on a target node. They are data to epdoctor: read with importlib.resources."""
