"""GCP: one cloud, two APIs. Compute Engine VMs (``providers.gcp.compute``) and Cloud TPU VMs
(``providers.gcp.tpu``) behind one :class:`~providers.base.Cloud` surface (``cloud.py``), one
router provider (``provider.py``) and one embedded local cloud serving both fake APIs
(``emulator.py``). What both plugins share lives here: labels (``labels.py``), error
classification (``errors.py``), client construction, retries and operation waits
(``api.py``), and what `up` makes in the project for both (service accounts, the head's
custom role, firewall rules: ``account.py``, over IAM and Resource Manager REST: ``iam.py``,
faked by ``iam_emulator.py``)."""
