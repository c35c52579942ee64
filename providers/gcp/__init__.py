"""GCP: one cloud, two APIs. Compute Engine VMs (``providers.gcp_compute``) and Cloud TPU VMs
(``providers.gcp_tpu``) behind one :class:`~providers.base.Cloud` surface (``cloud.py``), one
router provider (``provider.py``) and one embedded local cloud serving both fake APIs
(``emulator.py``). What both plugins share lives here: labels (``labels.py``), error
classification (``errors.py``) and client construction, retries and operation waits
(``api.py``)."""
