"""Ray Serve's floor for a dispatch: the same hops and payload sizes, no work.

``FloorIngress`` reads and parses the body (orjson or msgpack: the cheapest generic parse),
makes ``hops`` calls to ``Echo`` replicas carrying arrays of the sizes a dispatch ships (the
ETR features [O, 39], the round's arrays there and the solved arrays back), and answers a
precomputed dict of the size of a dispatch answer, serialized per request. What our dispatch
costs beyond this, at the same sizes, is the serving path's own overhead.

(No ``from __future__ import annotations``: FastAPI must see real types through
``serve.ingress``.)
"""

import dataclasses
from typing import Any

import msgpack
import numpy as np
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from ray import serve
from ray.serve.handle import DeploymentHandle

api = FastAPI()


@serve.deployment(ray_actor_options={"num_cpus": 0.25}, max_ongoing_requests=1024)
class Echo:
    async def echo(self, payload: Any, reply: Any) -> Any:  # async: Serve's cheapest hop
        return reply


@serve.deployment(ray_actor_options={"num_cpus": 0.25}, max_ongoing_requests=1024)
@serve.ingress(api)
class FloorIngress:
    """hops : 0, 1 or 2; sample : {"etr": (sent, returned), "solve": (sent, returned)}
    arrays of the dispatch's sizes; answer : a dict of the size of a dispatch answer."""

    def __init__(self, echo: DeploymentHandle, hops: int, sample: dict, answer: dict) -> None:
        self.echo, self.hops, self.sample, self.answer = echo, hops, sample, answer

    @api.post("/v1/dispatch")
    async def dispatch(self, request: Request) -> Response:
        body = await request.body()
        binary = "msgpack" in request.headers.get("content-type", "")
        parsed = msgpack.unpackb(body) if binary else orjson.loads(body)
        assert parsed  # parsed, then dropped: the floor does no work with it
        for stage in ("etr", "solve")[: self.hops]:
            sent, returned = self.sample[stage]
            await self.echo.echo.remote(sent, returned)
        if "msgpack" in request.headers.get("accept", ""):
            return Response(msgpack.packb(self.answer), media_type="application/x-msgpack")
        return Response(orjson.dumps(self.answer), media_type="application/json")


def floor_app(hops: int, sample: dict[str, tuple[Any, Any]], answer: dict) -> Any:
    return FloorIngress.bind(Echo.bind(), hops, sample, answer)


def dispatch_sample(round_: Any) -> tuple[dict[str, tuple[Any, Any]], dict]:
    """The arrays and answer a dispatch of ``round_`` ships (computed once, here)."""
    from etr import features_from_orders
    from planner import dispatch_round
    from planner.dispatch_round import round_arrays, solve_round
    from serve_app.schemas import plan_to_dict

    features = features_from_orders(round_.orders)
    _, arrays = round_arrays(round_)
    solved = solve_round(arrays, round_.weights)
    minutes = np.zeros(len(round_.orders), np.float32)
    plan = dispatch_round(round_, backend="numpy")
    answer = plan_to_dict(dataclasses.replace(plan, etr_model_version="1"))
    return {"etr": (features, minutes), "solve": (arrays, solved)}, answer
