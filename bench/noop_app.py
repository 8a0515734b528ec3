"""A no-op HTTP route on Ray Serve: the ceiling of Serve's ingress on a machine.

Reads the request's body and answers a fixed ETR-sized JSON; a Starlette app (no FastAPI), in
the same cluster and mode as the app it is measured beside (``bench/peer_triton.py``). Nothing
served through Serve's HTTP ingress can answer more requests a second than this.
"""

from ray import serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

ANSWER = b'{"minutes":[31.25],"model_version":"1"}'


async def noop(request: Request) -> Response:
    await request.body()
    return Response(ANSWER, media_type="application/json")


api = Starlette(routes=[Route("/v1/etr", noop, methods=["POST"])])


@serve.deployment(ray_actor_options={"num_cpus": 0.25}, max_ongoing_requests=1024)
@serve.ingress(api)
class Noop:
    pass
