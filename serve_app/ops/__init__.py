"""Operations tooling around the server, not on its request path: the local launcher
(``orml serve``), the harness tests and benches start apps with, fault drills, the load
generator, the heap probe (a diagnostic the ingress hosts)."""
