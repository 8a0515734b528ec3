"""Ray Serve deployments that own a device (OR solver, ETR model). Built with the serving issue."""
