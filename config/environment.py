"""The environment variables the product reads besides ``Settings``, each named once here.

``Settings`` (``config.settings``) holds the variables an operator sets for a process's
behaviour. The ones below are of two other kinds: secrets, whose names are the defaults of the
``*_env`` keys of ``args`` (a deployment may name another variable), and the hand-offs
``orml serve`` sets for the processes it starts (HAProxy's config wrapper, the Ingress replicas'
own listeners), which an operator running ``serve deploy`` leaves unset. The configuration
reference (``ops.config_reference``) lists every one of them with ``Settings``' fields.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    """name : the variable; description : what it holds; who : who sets or reads it."""

    name: str
    description: str
    who: str


API_TOKENS = Variable(
    "ORML_API_TOKENS",
    'API tokens, ";"-separated "TOKEN" or "TOKEN endpoint,..." entries',
    "default of args.auth.tokens_env; read by the Ingress replicas",
)
REDIS_PASSWORD = Variable(
    "ORML_REDIS_PASSWORD",
    "the L2 Redis's password",
    "default of args.cache.redis_password_env",
)
CACHE_SECRET = Variable(
    "ORML_CACHE_SECRET",
    "a secret of >= 16 bytes shared by the replicas: L2 values are sealed with an HMAC",
    "default of args.cache.seal_secret_env",
)
LEAN_PORTS_DIR = Variable(
    "ORML_LEAN_PORTS_DIR",
    "the directory where Ingress replicas register their own listeners' ports",
    "set by orml serve; unset: no own listeners",
)
LEAN_HOST = Variable(
    "ORML_LEAN_HOST",
    "the address the Ingress replicas' own listeners bind (default 127.0.0.1)",
    "set by orml serve",
)
HAPROXY_LANES = Variable(
    "ORML_HAPROXY_LANES",
    'the admission lanes for HAProxy, JSON {"path": capacity, ...}',
    "set by orml serve for its HAProxy config wrapper",
)
HAPROXY_REAL_BINARY = Variable(
    "ORML_HAPROXY_REAL_BINARY",
    "the HAProxy binary the config wrapper runs",
    "set by orml serve",
)
HAPROXY_QUEUE_MS = Variable(
    "ORML_HAPROXY_QUEUE_MS",
    "how long a request past a lane's capacity waits in HAProxy's queue, ms (default 5)",
    "bench/overload.py --proxy-queue-ms",
)
HAPROXY_SERVE_DEFAULTS = Variable(
    "ORML_HAPROXY_SERVE_DEFAULTS",
    "1 keeps Serve's HAProxy buffers, logging and niceness",
    "bench/overload.py --proxy-serve-defaults",
)

#: Every variable of this module, in the order the reference lists them.
VARIABLES = (
    API_TOKENS,
    REDIS_PASSWORD,
    CACHE_SECRET,
    LEAN_PORTS_DIR,
    LEAN_HOST,
    HAPROXY_LANES,
    HAPROXY_REAL_BINARY,
    HAPROXY_QUEUE_MS,
    HAPROXY_SERVE_DEFAULTS,
)
