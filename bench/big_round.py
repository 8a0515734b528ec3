"""The edge of the largest round: a dispatch at the configured limits over HTTP and gRPC vs
in-process.

    python bench/big_round.py [--quick] [--repeat 5] [--lanes] [--json PATH] [--out DIR]

One 5000-rider x 2000-order round (deploy.yaml's limits; --quick: 2000 x 800), planned
``--repeat`` times over HTTP and over gRPC (``orml.v1.Orml/Dispatch``, the message built and
serialized once, as the HTTP body is) by the app as deploy.yaml runs it on the CPU (with
``--lanes``: as ``orml serve`` runs it, HAProxy's admission lanes in front of the Ingress
replicas' own listeners), and in this
process (``dispatch_round``), alternating (the host is shared and noisy: medians); each answer
is parsed after its clock stops. In process twice:
the same plan as served (the ETR model's minutes from the same ONNX model in this process,
features and inference timed, then the round priced with them: the work the app does, less
its edge), and the plain round without ETR (the baseline of the runs before 2026-11-25, which
did less work than the app: no model, no ETR re-pricing). Reports the medians, the ratios, and
the served round's stages over each protocol (``timings_ms``: decode, ETR, pack, the solver
hop, unpack; and the time outside the pipeline: transport, framing, the answer's encoding)
beside the same plan's stages in process (``in_process_*``) and the solver's own time. Then,
in this process, the request to arrays each way the edge reads a round: for JSON the fast
paths (``RoundDecoder``: the compiled reader, straight to columns; msgspec's wire Structs,
riders gathered into columns from them) against the model's (pydantic
validation, domain types, ``pack_round``); for protobuf the reader (``round_message``: the
bytes straight to columns) against the model's (parse, fields, the model); the same arrays;
and the plan to its gRPC answer's bytes, written from its columns (``answer_message``) and
filled from its dict. Last, a round one rider past the limit (``orders`` orders): the time
to its 413 over HTTP (JSON, msgpack) and to gRPC's RESOURCE_EXHAUSTED, and in this process
the compiled reader's 413 against the model's (the way such a body was answered before the
reader counted past a limit).
Writes DIR/big_round.csv and (--json) every run.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc
import httpx
import msgpack
import numpy as np
import orjson
from common import log, parser, write_csv

from domain import DispatchPlan
from etr.features import features_from_orders
from etr.repository import load_artifact
from etr.select import load_runtime
from ops import local
from planner import dispatch_round, generate_round
from planner.round_to_arrays import PackedRound
from serve_app import codecs
from serve_app.config import DispatchAppArgs
from serve_app.grpc_api import convert
from serve_app.grpc_api import orml_pb2 as pb
from serve_app.grpc_api.answer_message import dispatch_answer
from serve_app.http import codec
from serve_app.http.answer_json import dispatch_answer_json
from serve_app.http.routes import lane_capacities
from serve_app.pipeline.errors import TooLarge
from serve_app.round_decoder import RoundDecoder
from serve_app.schemas import DispatchRequest, RequestModels, plan_to_dict

T = TypeVar("T")


def main() -> None:
    ap = parser(__doc__, "a 2000 x 800 round, three repeats")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--lanes",
        action="store_true",
        help="the app as orml serve runs it: HAProxy's admission lanes in front and the "
        "Ingress replicas' own listeners behind them (default: as deploy.yaml, Serve's)",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    riders, orders = (2000, 800) if args.quick else (5000, 2000)
    repeat = 3 if args.quick else args.repeat
    round_ = generate_round(riders, orders, seed=5)
    request = DispatchRequest.from_domain(round_)
    body = request.model_dump_json().encode()
    message = pb.DispatchRequest(**request.model_dump(exclude_none=True)).SerializeToString()
    log(f"round {riders} x {orders}: {len(body) / 2**20:.1f} MiB of JSON")
    over_riders = DispatchAppArgs().limits.max_riders + 1
    over = DispatchRequest.from_domain(generate_round(over_riders, orders, seed=5))
    over_body = {codec.JSON: over.model_dump_json().encode()}
    over_body[codec.MSGPACK] = msgpack.packb(orjson.loads(over_body[codec.JSON]))
    over_message = pb.DispatchRequest(**over.model_dump(exclude_none=True)).SerializeToString()
    dispatch_round(generate_round(8, 4, seed=1))  # load the compiled kernels here too
    etr = load_runtime(load_artifact(), "onnxruntime")

    def planned_with_etr() -> DispatchPlan:
        minutes = etr.to_numpy(etr.predict(features_from_orders(round_.orders)))
        return dispatch_round(round_, etr_minutes=minutes)

    rows = []
    headers = {"content-type": "application/json", "x-timeout-ms": "120000"}
    app_args = DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime")
    lanes = lane_capacities(app_args.admission) if args.lanes else None
    with local.local_serve(num_cpus=4, namespace="bench-big", haproxy_lanes=lanes) as ep:
        local.run_app(app_args)
        local.wait_ready(ep.http)
        channel = grpc.insecure_channel(
            ep.grpc, options=[("grpc.max_receive_message_length", 64 << 20)]
        )
        # Bytes in and out: the message is serialized once, the answer parsed after the clock.
        grpc_dispatch = channel.unary_unary("/orml.v1.Orml/Dispatch")
        metadata = (("x-timeout-ms", "120000"), ("application", "orml"))
        with httpx.Client(base_url=ep.http, timeout=180) as client:
            client.post("/v1/dispatch", content=body, headers=headers).raise_for_status()
            grpc_dispatch(message, metadata=metadata, timeout=180)
            for k in range(repeat):
                t0 = time.perf_counter()
                planned = planned_with_etr()
                in_process = time.perf_counter() - t0
                in_process_plan = {a.order_id: a.rider_id for a in planned.assignments}
                t0 = time.perf_counter()
                dispatch_round(round_)
                without_etr = time.perf_counter() - t0
                t0 = time.perf_counter()
                got = client.post("/v1/dispatch", content=body, headers=headers)
                over_http = time.perf_counter() - t0
                got.raise_for_status()
                t0 = time.perf_counter()
                raw = grpc_dispatch(message, metadata=metadata, timeout=180)
                over_grpc = time.perf_counter() - t0
                grpc_answer = pb.DispatchResponse.FromString(raw)
                grpc_plan = {a.order_id: a.rider_id for a in grpc_answer.assignments}
                answer = got.json()
                stages = answer["timings_ms"]
                grpc_stages = dict(grpc_answer.timings_ms)
                served_plan = {a["order_id"]: a["rider_id"] for a in answer["assignments"]}
                rows.append(
                    {
                        "run": k,
                        "in_process_s": in_process,
                        "in_process_no_etr_s": without_etr,
                        "http_s": over_http,
                        "grpc_s": over_grpc,
                        "same_plan": served_plan == in_process_plan == grpc_plan,
                        **stages,
                        # Outside the pipeline: the transport, the edge's framing, encoding.
                        "edge_ms": over_http * 1e3 - stages["total_ms"],
                        **{f"grpc_{k}": v for k, v in grpc_stages.items()},
                        **{f"in_process_{k}": v for k, v in planned.timings_ms.items()},
                        "grpc_edge_ms": over_grpc * 1e3 - grpc_stages["total_ms"],
                    }
                )
                log(
                    f"  run {k}: in-process {in_process:.2f} s (without ETR {without_etr:.2f}),"
                    f" HTTP {over_http:.2f} s, gRPC {over_grpc:.2f} s, the same plan: "
                    f"{served_plan == in_process_plan == grpc_plan}"
                )
            refused = served_refusals(
                client, lambda: grpc_dispatch(over_message, metadata=metadata, timeout=60),
                over_body, repeat,
            )  # fmt: skip
        channel.close()
    write_csv(args.out / "big_round.csv", rows)
    to_arrays = body_to_arrays(body, message, repeat)
    to_arrays.update(answer_to_bytes(dispatch_round(round_), repeat))
    refused.update(refusals(over_body, repeat))
    med = {
        key: statistics.median(r[key] for r in rows)
        for key in rows[0]
        if key not in ("run", "same_plan")
    }
    ratio = med["http_s"] / med["in_process_s"]
    ratio_grpc = med["grpc_s"] / med["in_process_s"]
    ratio_no_etr = med["http_s"] / med["in_process_no_etr_s"]
    print(
        "| round | in-process s (the same plan) | over HTTP s | ratio | over gRPC s | ratio |"
        " in-process s without ETR (before) | HTTP ratio |\n|---|---|---|---|---|---|---|---|\n"
        f"| {riders} x {orders} ({len(body) / 2**20:.1f} MiB JSON, "
        f"{len(message) / 2**20:.1f} MiB protobuf) | {med['in_process_s']:.2f} | "
        f"{med['http_s']:.2f} | {ratio:.2f}x | {med['grpc_s']:.2f} | {ratio_grpc:.2f}x | "
        f"{med['in_process_no_etr_s']:.2f} | {ratio_no_etr:.2f}x |"
    )
    stage_names = ("decode_ms", "etr_ms", "pack_ms", "solve_ms", "unpack_ms", "total_ms")
    for protocol, prefix in (("HTTP", ""), ("gRPC", "grpc_")):
        print(
            f"\nserved stages over {protocol} (median ms): "
            + ", ".join(f"{k.removesuffix('_ms')} {med[prefix + k]:.0f}" for k in stage_names)
            + f"; outside the pipeline {med[prefix + 'edge_ms']:.0f}"
        )
    print(
        "in process, the same plan (median ms): "
        + ", ".join(
            f"{k.removesuffix('_ms')} {med['in_process_' + k]:.0f}"
            for k in (*stage_names, "device_ms")
            if "in_process_" + k in med
        )
        + f"; served over HTTP, the solver's own: device {med['device_ms']:.0f}"
    )
    print(
        f"\n| {riders} x {orders}: request to arrays, in process (median ms) | fast path |"
        " the usual path (a request: the model's; the answer: its dict's) | ratio |"
        "\n|---|---|---|---|"
    )
    for name, fast, model in (
        ("JSON body", to_arrays["fast_ms"], to_arrays["model_ms"]),
        ("JSON body, msgspec's wire Structs", to_arrays["structs_ms"], to_arrays["model_ms"]),
        (
            "msgpack body (the usual path here: the wire Structs)",
            to_arrays["msgpack_fast_ms"],
            to_arrays["msgpack_structs_ms"],
        ),
        ("protobuf message", to_arrays["message_fast_ms"], to_arrays["message_model_ms"]),
        ("the plan to its protobuf answer", to_arrays["answer_ms"], to_arrays["answer_dict_ms"]),
        (
            "the plan to its JSON answer",
            to_arrays["answer_json_ms"],
            to_arrays["answer_json_dict_ms"],
        ),
    ):
        print(f"| {name} | {fast:.1f} | {model:.1f} | {model / fast:.2f}x faster |")
    print(
        f"\n| {over_riders} x {orders}, one rider past the limit: to the 413 (median ms) |"
        " the reader (counts past the limit) | the model (before) | ratio |\n|---|---|---|---|"
    )
    for media in (codec.JSON, codec.MSGPACK):
        fast, model = refused[f"{media}_reader_ms"], refused[f"{media}_model_ms"]
        print(f"| {media}, in process | {fast:.0f} | {model:.0f} | {model / fast:.1f}x faster |")
        print(f"| {media}, served over HTTP | {refused[f'{media}_http_ms']:.0f} | | |")
    print(f"| protobuf, served over gRPC | {refused['grpc_ms']:.0f} | | |")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "runs": rows,
                    "medians": med,
                    "ratio": ratio,
                    "ratio_grpc": ratio_grpc,
                    "ratio_no_etr": ratio_no_etr,
                    "body_to_arrays": to_arrays,
                    "past_the_limits": refused,
                    "front": "orml serve's lanes" if args.lanes else "deploy.yaml's",
                },
                indent=1,
            )
        )


def body_to_arrays(body: bytes, message: bytes, repeat: int) -> dict[str, float]:
    """Median ms from the request to the packed round, in this process, each way the edge
    reads one, alternating: the JSON ``body`` by the fast paths (``RoundDecoder.decode``: the
    compiled reader, and the wire Structs alone) and by the model's; the same round as
    msgpack by the compiled reader and by the Structs; the protobuf ``message`` by the reader
    (``from_message``: its bytes straight to columns) and by the model's (parse, fields, the
    model). Raises AssertionError if their arrays differ."""
    limits = DispatchAppArgs().limits
    decoder = RoundDecoder.for_limits(limits)
    model = RequestModels.for_limits(limits).dispatch
    codecs.warm_up()

    def json_by_model() -> PackedRound:
        return model.model_validate_json(body).to_source().packed()

    def message_by_model() -> PackedRound:
        fields = convert.message_to_dict(pb.DispatchRequest.FromString(message))
        return model.model_validate(fields).to_source().packed()

    packed_body = msgpack.packb(orjson.loads(body))
    ways = {
        "fast_ms": lambda: decoder.decode(body).packed(),
        "structs_ms": lambda: decoder.decode(body, compiled=False).packed(),
        "msgpack_fast_ms": lambda: decoder.decode(packed_body, codec.MSGPACK).packed(),
        "msgpack_structs_ms": lambda: decoder.decode(
            packed_body, codec.MSGPACK, compiled=False
        ).packed(),
        "model_ms": json_by_model,
        "message_fast_ms": lambda: decoder.from_message(message, message_by_model).packed(),
        "message_model_ms": message_by_model,
    }
    medians, packed = _alternating(ways, repeat)
    want = packed["model_ms"]
    for got in packed.values():
        assert np.array_equal(got.routes.stop_xy, want.routes.stop_xy)
        assert np.array_equal(got.owner, want.owner) and got.order_ids == want.order_ids
    return medians


def served_refusals(
    client: httpx.Client,
    over_grpc: Callable[[], object],
    bodies: dict[str, bytes],
    repeat: int,
) -> dict[str, float]:
    """Median ms to the served refusal of a round past the limits: each body in ``bodies``
    (by media) over HTTP (413), and ``over_grpc`` (RESOURCE_EXHAUSTED). Raises
    AssertionError on any other answer."""

    def http(media: str) -> Callable[[], str]:
        def post() -> str:
            got = client.post(
                "/v1/dispatch", content=bodies[media], headers={"content-type": media}
            )
            assert got.status_code == 413, got.text[:200]
            return got.json()["detail"]

        return post

    def grpc_call() -> str:
        try:
            over_grpc()
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc
            return str(exc.details())
        raise AssertionError("a round past the limits was planned over gRPC")

    ways = {f"{media}_http_ms": http(media) for media in bodies}
    ways["grpc_ms"] = grpc_call
    medians, answers = _alternating(ways, repeat)
    log(f"  past the limits, served: {answers}")
    return medians


def refusals(bodies: dict[str, bytes], repeat: int) -> dict[str, float]:
    """Median ms to the 413 of each body in ``bodies`` (by media), in this process: by the
    compiled reader (``RoundDecoder.read``) and by the model (``codec.validate_body``).
    Raises AssertionError where the two answers differ."""
    limits = DispatchAppArgs().limits
    decoder = RoundDecoder.for_limits(limits)
    model = RequestModels.for_limits(limits).dispatch
    codecs.warm_up()

    def refused(read: Callable[[], object]) -> Callable[[], str]:
        def call() -> str:
            try:
                read()
            except TooLarge as exc:
                return str(exc)
            raise AssertionError("a round past the limits was read")

        return call

    ways = {}
    for media, body in bodies.items():
        ways[f"{media}_reader_ms"] = refused(lambda b=body, m=media: decoder.read(b, m))
        ways[f"{media}_model_ms"] = refused(
            lambda b=body, m=media: codec.validate_body(b, m, model)
        )
    medians, answers = _alternating(ways, repeat)
    assert len(set(answers.values())) == 1, answers
    return medians


def answer_to_bytes(plan: DispatchPlan, repeat: int) -> dict[str, float]:
    """Median ms from the plan to its answer's bytes, alternating: gRPC's written from its
    columns (``answer_message``) and filled from its dict (``plan_to_dict``, the message filled
    field by field, serialized); JSON's assembled from its columns (``answer_json``) and
    encoded from its dict. Raises AssertionError if either pair differs."""
    codecs.warm_up()
    ways = {
        "answer_ms": lambda: bytes(dispatch_answer(plan)),
        "answer_dict_ms": lambda: convert.dispatch_response(plan_to_dict(plan)).SerializeToString(),
        "answer_json_ms": lambda: dispatch_answer_json(plan),
        "answer_json_dict_ms": lambda: orjson.dumps(plan_to_dict(plan)),
    }
    medians, got = _alternating(ways, repeat)
    answers = {
        pb.DispatchResponse.FromString(got[k]).SerializeToString(deterministic=True)
        for k in ("answer_ms", "answer_dict_ms")
    }
    assert len(answers) == 1, "the two gRPC answers differ"
    assert got["answer_json_ms"] == got["answer_json_dict_ms"], "the two JSON answers differ"
    return medians


def _alternating(
    ways: dict[str, Callable[[], T]], repeat: int
) -> tuple[dict[str, float], dict[str, T]]:
    """Each way called in turn, ``repeat`` rounds (at least 3): (median ms by name, the last
    result of each)."""
    times: dict[str, list[float]] = {k: [] for k in ways}
    got: dict[str, T] = {}
    for _ in range(max(repeat, 3)):
        for name, way in ways.items():
            t0 = time.perf_counter()
            got[name] = way()
            times[name].append((time.perf_counter() - t0) * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}, got


if __name__ == "__main__":
    main()
