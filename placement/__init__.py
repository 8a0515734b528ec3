"""GPU-aware placement: profiles, packing onto heterogeneous cards, Serve options. Not built yet."""
