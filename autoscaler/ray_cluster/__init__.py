"""Ray as the cluster's workload: its pending work is our demand, its nodes our capacity,
its idle times our idle times, and our decisions are reported back so ``ray status`` shows
them. ``state`` maps Ray's protobufs to our records (no Ray import), ``report`` builds the
state we report, ``client`` is the one module that talks to Ray's GCS.
"""
