"""A simulated fleet day: many cities' dispatch and ETR traffic on a heterogeneous GPU fleet,
served by the same scheduling objects the app runs (batch queue, offline pacing, Busy, the
router's ranking, the Busy autoscaling decision) and the packer's plans, on a simulated clock.

No Ray here (an architecture test holds it to that): ``fleet.engine`` is the discrete-event
core, ``fleet.demand`` turns MDRP days into request streams, ``fleet.day`` runs the policies
side by side and ``fleet.report`` prints and plots them. Every GPU figure is an estimate of the
scenario's call-cost model (``fleet/scenario.yaml``), labelled so wherever it is shown.
"""
