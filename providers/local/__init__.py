"""The local cloud: every cloud the product supports, served on this machine for
`emulator: true` clusters, tests and the quickstart.

- ``servers.py`` starts a cluster's API servers: ``aws_server.py`` (moto's EC2 server) and
  ``gcp/server.py`` (fake Compute Engine, Cloud TPU, IAM and firewall APIs); instances get
  loopback addresses, so nodes reach each other as on a private network.
- ``simulator.py`` boots every instance from its real boot data (``boot_data.py``) on a
  simulated host (``hosts.py``: devices from the catalog) in a sandbox of its own
  (``sandbox.py``), with stand-ins only for what cannot run here (``standins/``); what it
  prints is the console the cloud's console API returns (``consoles.py``).

Nothing in the product's cloud plugins or ``accel/`` imports it, and nodes never need it (it
is installed by the ``local`` extra)."""
