// The load that falls due over the next hour, by minute.
//
// The HTTP API has no forecast call: this reads the topic's waiting messages
// with the paged scan (no payloads), up to SAMPLE_BUCKETS buckets in parallel,
// at most MAX_READ in all; when that is not all of them, the counts are scaled
// up from the sample by the topic's waiting count. A forecast call, when the API has one, replaces `dueNextHour`
// alone: the chart takes its { bins, read, complete } answer.
import { call, enc } from './api.js';
import { h } from './ui.js';

export const MINUTES = 60;
const MAX_READ = 2000;
// Ids spread evenly over buckets: a few buckets are a fair sample, and each scan
// call costs a storage round trip however few it reads.
const SAMPLE_BUCKETS = 4;

async function readBucket(topic, bucket, cap, now, bins) {
  let after = '';
  let read = 0;
  for (;;) {
    const limit = Math.min(1000, cap - read);
    const page = await call('GET', `/v1/topics/${enc(topic)}/buckets/${bucket}/messages`
      + `?limit=${limit}&states=waiting&without_payloads=true&after_id=${enc(after)}`);
    for (const m of page.messages || []) {
      read += 1;
      const minute = Math.floor((Number(m.timestamp_ms) - now) / 60000);
      if (minute >= 0 && minute < MINUTES) bins[minute] += 1;
    }
    if (page.done) return { read, complete: true };
    if (read >= cap) return { read, complete: false };
    after = page.next_after_id;
  }
}

export async function dueNextHour(topic, buckets, waiting, now = Date.now()) {
  const bins = new Array(MINUTES).fill(0);
  const sampled = Math.min(buckets, SAMPLE_BUCKETS);
  const cap = Math.ceil(MAX_READ / sampled);
  const parts = await Promise.all(
    Array.from({ length: sampled }, (_, bucket) => readBucket(topic, bucket, cap, now, bins)));
  const read = parts.reduce((sum, p) => sum + p.read, 0);
  const complete = sampled === buckets && parts.every((p) => p.complete);
  const scale = complete || !read ? 1 : Math.max(1, waiting / read);
  return { bins: bins.map((b) => Math.round(b * scale)), read, complete };
}

const SVG = 'http://www.w3.org/2000/svg';

export function chart({ bins, read, complete }) {
  const top = Math.max(1, ...bins);
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', 'chart');
  svg.setAttribute('viewBox', `0 0 ${MINUTES * 10} 100`);
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('role', 'img');
  const total = bins.reduce((a, b) => a + b, 0);
  svg.setAttribute('aria-label', `${total} messages due in the next hour, at most ${top} in one minute`);
  bins.forEach((count, minute) => {
    const rect = document.createElementNS(SVG, 'rect');
    const height = (count / top) * 100;
    rect.setAttribute('x', String(minute * 10 + 1));
    rect.setAttribute('width', '8');
    rect.setAttribute('y', String(100 - height));
    rect.setAttribute('height', String(height));
    const title = document.createElementNS(SVG, 'title');
    title.textContent = `+${minute} min: ${count}`;
    rect.append(title);
    svg.append(rect);
  });
  return h('figure', {}, svg, h('figcaption', { class: 'muted' },
    `${total} due in the next hour (peak ${top === 1 && !total ? 0 : top} a minute), `,
    complete ? `from all ${read} waiting messages.` : `estimated from a sample of ${read} waiting messages.`));
}
