"""The local cloud: every cloud the product supports, served on 127.0.0.1 for `emulator: true`
clusters, tests and the quickstart (EC2 from moto's server, fake Compute Engine, Cloud TPU,
IAM and firewall APIs in ``gcp/``, started by ``servers.py``), and the node simulator
(``simulator.py``) that boots each instance as a simulated host (``hosts.py``).

Nothing in the product's cloud plugins or ``accel/`` imports it, and nodes never need it."""
