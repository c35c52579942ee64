"""The reconcile loop's parts, in the style of Karpenter's controllers: one immutable
observation per round (``observe``), small sub-reconcilers that each read it and return
actions (``cleanup``: what the cloud stopped; ``liveness``: nodes that never came up;
``disruption``: idle nodes; ``launch``: what the plan needs; ``ray_report``: what Ray is
told), and one step that applies the actions (``apply``). ``autoscaler.reconciler`` runs a
round."""
