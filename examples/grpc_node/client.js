// Calling orml-serve over gRPC from Node: an ETR call, a dispatch round, and a refused request
// whose google.rpc.Status details name the bad field.
//
//   npm install
//   node client.js 127.0.0.1:9000 [etr.json] [dispatch.json]
//
// The request files are the HTTP API's JSON bodies (`orml example etr`, `orml example
// dispatch`): the proto keeps those snake_case names, so they are passed as they are. Prints
// one JSON line per call.
"use strict";

const fs = require("fs");
const path = require("path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");
const protobuf = require("protobufjs");
const googleProtos = require("google-proto-files");

const PROTO = path.join(__dirname, "..", "..", "serve_app", "grpc_api", "orml.proto");

// keepCase: the proto's field names are snake_case and so are the objects we send; without it
// proto-loader expects camelCase objects and silently drops the snake_case fields.
const definition = protoLoader.loadSync(PROTO, { keepCase: true, defaults: false });
const orml = grpc.loadPackageDefinition(definition).orml.v1;

// google.rpc.Status and its details, from Google's own protos (google-proto-files ships them).
const rpc = new protobuf.Root();
rpc.resolvePath = (origin, target) =>
  target.startsWith("google/") ? path.join(googleProtos.getProtoPath(), "..", target) : target;
rpc.loadSync(["google/rpc/status.proto", "google/rpc/error_details.proto"]);
const Status = rpc.lookupType("google.rpc.Status");
const DETAIL_TYPES = {
  "type.googleapis.com/google.rpc.BadRequest": rpc.lookupType("google.rpc.BadRequest"),
  "type.googleapis.com/google.rpc.RetryInfo": rpc.lookupType("google.rpc.RetryInfo"),
};

function readJson(file, fallback) {
  return file ? JSON.parse(fs.readFileSync(file, "utf8")) : fallback;
}

const ORDER = {
  id: "o-1",
  pickup: { lat: 31.2304, lng: 121.4737 },
  dropoff: { lat: 31.2204, lng: 121.4837 },
  created_at: 1767225600,
  ready_at: 1767226200,
  promised_at: 1767227400,
  size: 1,
  items: 2,
};

function call(client, method, request, timeoutMs) {
  const metadata = new grpc.Metadata();
  // gRPC's own deadline does not reach Serve's replicas: say it in x-timeout-ms too.
  metadata.set("x-timeout-ms", String(timeoutMs));
  const deadline = new Date(Date.now() + timeoutMs);
  return new Promise((resolve) => {
    client[method](request, metadata, { deadline }, (err, answer) => resolve({ err, answer }));
  });
}

// The refused call's answer: the code, the message, and the fields or retry delay it names.
function describeError(err) {
  const out = { code: grpc.status[err.code], message: err.details };
  const raw = err.metadata && err.metadata.get("grpc-status-details-bin")[0];
  if (!raw) return out;
  for (const any of Status.decode(raw).details) {
    const type = DETAIL_TYPES[any.type_url];
    if (!type) continue;
    const detail = type.toObject(type.decode(any.value), { longs: Number });
    if (detail.fieldViolations) out.fields = detail.fieldViolations.map((v) => v.field);
    if (detail.retryDelay) out.retry_s = Number(detail.retryDelay.seconds || 0);
  }
  return out;
}

async function main() {
  const [address, etrFile, dispatchFile] = process.argv.slice(2);
  if (!address) throw new Error("usage: node client.js HOST:PORT [etr.json] [dispatch.json]");
  const client = new orml.Orml(address, grpc.credentials.createInsecure());

  const etr = await call(client, "Etr", readJson(etrFile, { orders: [ORDER] }), 10000);
  if (etr.err) throw etr.err;
  console.log(JSON.stringify({ call: "Etr", ...etr.answer }));

  const round = readJson(dispatchFile, {
    now: ORDER.created_at,
    riders: [{ id: "r-1", position: ORDER.pickup, speed_mps: 5, capacity: 4 }],
    orders: [ORDER],
  });
  const plan = await call(client, "Dispatch", round, 10000);
  if (plan.err) throw plan.err;
  // defaults: false leaves fields the server did not send undefined: an empty list is absent.
  const { assignments = [], unassigned = [], model_version } = plan.answer;
  console.log(JSON.stringify({ call: "Dispatch", assignments, unassigned, model_version }));

  const { created_at, ...undated } = ORDER; // a required field left out
  const refused = await call(client, "Etr", { orders: [ORDER, undated] }, 10000);
  console.log(JSON.stringify({ call: "Etr (refused)", ...describeError(refused.err) }));
  client.close();
}

main().catch((err) => {
  console.error(err.stack || String(err));
  process.exit(1);
});
