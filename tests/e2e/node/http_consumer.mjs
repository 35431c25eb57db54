// A consumer of dejaq's HTTP pull API in Node.js with its built-in fetch, no
// library. It produces COUNT messages due over SPREAD_MS, then 3 workers long-poll
// for them: most are acked, some nacked with a delay (acked when they come
// again), some left to their lease running out (acked when they come again).
// It prints whether every message was settled once and none came early, the
// lateness of first deliveries, and how long before the first was due the
// producing ended; any unexpected answer exits non-zero.
//
//   node http_consumer.mjs http://127.0.0.1:7780 [COUNT] [SPREAD_MS]

const base = process.argv[2];
const count = Number(process.argv[3] ?? 2000);
const spreadMs = Number(process.argv[4] ?? 4000);
const topic = `node-pull-${Date.now()}`;
const leaseMs = 400;

async function call(path, body) {
  const response = await fetch(base + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await response.json();
  if (response.status >= 300) {
    console.error(`${path}: ${response.status} ${JSON.stringify(answer)}`);
    process.exit(1);
  }
  return answer;
}

await call("/v1/topics", { name: topic });
const start = Date.now() + 1000;
// The batches go at once: sent one after another, on a loaded machine they
// could still be on their way when the first messages come due.
const batches = [];
for (let first = 0; first < count; first += 500) {
  const messages = [];
  for (let i = first; i < Math.min(count, first + 500); i++) {
    messages.push({ id: `m${i}`, timestamp_ms: start + Math.floor((i * spreadMs) / count), payload: `${i}` });
  }
  batches.push(call(`/v1/topics/${topic}/batches`, { messages }));
}
await Promise.all(batches);
const spare = start - Date.now(); // < 0: lateness counts time the producing took

const acked = new Map(); // id -> acks that took effect
const lateness = []; // ms, of first deliveries
let early = 0;
let nacked = 0;
let expired = 0;

// What a worker does with a message's first delivery: by its number, so each kind is seen.
function plan(n) {
  if (n % 10 === 3) return "nack";
  if (n % 10 === 7) return "expire";
  return "ack";
}

async function worker() {
  while (acked.size < count) {
    const { deliveries } = await call(`/v1/topics/${topic}/lease`, { max: 50, wait_ms: 1000, lease_ms: leaseMs });
    const now = Date.now();
    const acks = [];
    const nacks = [];
    for (const d of deliveries) {
      if (now < d.timestamp_ms) early += 1;
      const kind = d.deliveries === 1 ? plan(Number(d.payload)) : "ack";
      if (d.deliveries === 1) lateness.push(now - d.timestamp_ms);
      if (kind === "ack") acks.push(d.lease_token);
      else if (kind === "nack") nacks.push(d.lease_token);
      else expired += 1; // its lease runs out: it comes again
    }
    // Settled while the worker polls again: a poll is never behind a settle.
    if (nacks.length) pending.push(nack(nacks));
    if (acks.length) pending.push(ack(acks));
  }
}

const pending = [];

async function nack(tokens) {
  const { results } = await call(`/v1/topics/${topic}/nack`, { lease_tokens: tokens, delay_ms: 200 });
  nacked += results.filter((r) => r.ok).length;
}

async function ack(tokens) {
  const { results } = await call(`/v1/topics/${topic}/ack`, { lease_tokens: tokens });
  for (const r of results) {
    if (!r.ok) {
      console.error(`ack refused: ${JSON.stringify(r)}`);
      process.exit(1);
    }
    acked.set(r.id, (acked.get(r.id) ?? 0) + 1);
  }
}

await Promise.all([worker(), worker(), worker()]);
await Promise.all(pending);
const twice = [...acked.values()].filter((n) => n !== 1).length;
const described = await (await fetch(`${base}/v1/topics/${topic}`)).json();
const left = JSON.stringify(described.counts ?? {});
lateness.sort((a, b) => a - b);
const pct = (p) => lateness[Math.min(lateness.length - 1, Math.floor((p / 100) * lateness.length))];
console.log(`settled ${acked.size} of ${count}, ${twice} more than once`);
console.log(`early ${early}`);
console.log(`nacked ${nacked > 0}, expired ${expired > 0}`);
console.log(`left ${left}`);
console.log(`lateness p50 ${pct(50)} ms p99 ${pct(99)} ms max ${lateness[lateness.length - 1]} ms`);
console.log(`produced ${spare} ms before the first was due`);
