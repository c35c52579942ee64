"""Stand-ins for what a simulated host cannot run here (``standin.py``, ``python/pynvml.py``)."""
