"""The local GCP: fake Compute Engine, Cloud TPU, IAM and Resource Manager REST APIs served
on one port (``server.py``)."""
