"""Ray Serve deployments that own a device: the OR solver and the ETR model, and what they
share (the batcher, the device guard, the errors they raise). Its public surface is
``__all__``, each name imported on first use (``actors.scheduling`` loads without Ray)."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "or_solver": ["OrSolverDeployment"],
        "etr_model": ["EtrDeployment"],
        "etr_batcher": ["EtrBatcher", "EtrUserConfig"],
        "errors": ["DeviceUnhealthy", "VersionNotLoaded"],
    },
)
