"""A simulated fleet day: many cities' dispatch and ETR traffic on a heterogeneous GPU fleet,
served by the same scheduling objects the app runs (batch queue, offline pacing, Busy, the
router's ranking, the Busy autoscaling decision) and the packer's plans, on a simulated clock.

No Ray here (an architecture test holds it to that): ``fleet.engine`` is the discrete-event
core, ``fleet.demand`` turns MDRP days into request streams, ``fleet.day`` runs the policies
side by side and ``fleet.report`` prints and plots them. What a call costs comes from the
profiles (``fleet.call_costs``): measured where the type was measured, else derived by the
profiles' scaling rule, and the report says which.
"""
