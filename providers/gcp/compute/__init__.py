"""GCP Compute Engine node provider: a node is one VM (``machineType``, GPUs built in or
attached with ``guestAccelerators``)."""
