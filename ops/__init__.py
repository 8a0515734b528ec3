"""Operations tooling around the server, not on its request path: the local launcher
(``orml serve``), the harness tests and benches start apps with, fault drills, the load
generator and load tester, the hostile catalogue, the replay client, model rolls, HAProxy's
config rewrite. ``cli`` and ``bench`` use it; nothing under ``serve_app`` imports it."""
