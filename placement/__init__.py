"""GPU-aware placement: an inventory of cards and CPU nodes, a demand, the models' profiles
(``devices.profiles``), a packer that chooses replicas per card, and the Serve config and
RayService it emits. Its public surface is ``__all__``, each name imported on first use."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "packer": ["PLANNERS", "Plan", "PlacementInfeasible", "plan_milp"],
        "emit": ["emit_config"],
        "inventory": ["Inventory", "Demand", "load_inventory", "load_demand", "discover_inventory"],
        "kuberay": ["rayservice", "RayServiceOptions"],
    },
)
