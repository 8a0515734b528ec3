"""Device knowledge: the GPU catalogue, this machine's GPU type, and per-model profiles
(memory and latency against batch size, measured or estimated). Below ``etr`` and ``actors``,
which size and emulate devices with it; ``placement`` plans from it."""
