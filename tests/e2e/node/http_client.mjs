// A client of dejaq's HTTP API in another language: Node.js and its built-in
// fetch, no library. It creates a topic, produces, moves, cancels and gets,
// and prints one line per step; any unexpected answer exits non-zero.
//
//   node http_client.mjs http://127.0.0.1:7780

const base = process.argv[2];
const far = 2_000_000_000_000; // 2033: the message waits

async function call(method, path, body) {
  const response = await fetch(base + path, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = await response.json();
  return { status: response.status, type: response.headers.get("content-type"), answer };
}

function expect(what, got, want) {
  if (got !== want) {
    console.error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
    process.exit(1);
  }
}

const made = await call("POST", "/v1/topics", { name: "from-node" });
expect("create", made.status, 201);

const sent = await call("POST", "/v1/topics/from-node/messages", {
  id: "n1",
  timestamp_ms: far,
  payload: "hello from node",
});
expect("produce", sent.answer.status, "ACCEPTED");
console.log(`produced ${sent.answer.id}`);

const batch = await call("POST", "/v1/topics/from-node/batches", {
  messages: [
    { id: "n2", timestamp_ms: far, payload_base64: Buffer.from([0, 255]).toString("base64") },
    { id: "n1", timestamp_ms: far },
  ],
});
console.log(`batch ${batch.answer.results.map((r) => r.status).join(" ")}`);

const got = await call("GET", "/v1/topics/from-node/messages/n1");
console.log(`got ${got.answer.id} version ${got.answer.version} payload ${got.answer.payload}`);

const moved = await call("POST", "/v1/topics/from-node/messages/n1/move", {
  version: got.answer.version,
  timestamp_ms: far + 1000,
});
console.log(`moved to ${moved.answer.timestamp_ms - far} ms later, version ${moved.answer.version}`);

const stale = await call("POST", "/v1/topics/from-node/messages/n1/cancel", { version: 1 });
expect("stale cancel", stale.type.split(";")[0], "application/problem+json");
console.log(`stale cancel refused: ${stale.status} ${stale.answer.code}`);

const cancelled = await call("POST", "/v1/topics/from-node/messages/n1/cancel", {
  version: moved.answer.version,
});
console.log(`cancelled, version ${cancelled.answer.version}`);

const gone = await call("GET", "/v1/topics/from-node/messages/n1");
console.log(`get after cancel: ${gone.status} ${gone.answer.code}`);
