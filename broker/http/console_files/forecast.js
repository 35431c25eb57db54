// The load that falls due over the next hour, by minute.
//
// The HTTP API has no forecast call: this reads the topic's waiting messages
// with the paged scan (no payloads), at most MAX_READ of them, and counts those
// due within the hour. A forecast call, when the API has one, replaces
// `dueNextHour` alone: the chart takes its { bins, read, complete } answer.
import { call, enc } from './api.js';
import { h } from './ui.js';

export const MINUTES = 60;
const PAGE = 1000;
const MAX_READ = 20000;

export async function dueNextHour(topic, buckets, now = Date.now()) {
  const bins = new Array(MINUTES).fill(0);
  let read = 0;
  let complete = true;
  for (let bucket = 0; bucket < buckets; bucket += 1) {
    let after = '';
    for (;;) {
      if (read >= MAX_READ) { complete = false; break; }
      const page = await call('GET', `/v1/topics/${enc(topic)}/buckets/${bucket}/messages`
        + `?limit=${PAGE}&states=waiting&without_payloads=true&after_id=${enc(after)}`);
      for (const m of page.messages || []) {
        read += 1;
        const minute = Math.floor((Number(m.timestamp_ms) - now) / 60000);
        if (minute >= 0 && minute < MINUTES) bins[minute] += 1;
      }
      if (page.done) break;
      after = page.next_after_id;
    }
    if (!complete) break;
  }
  return { bins, read, complete };
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
    complete ? `from all ${read} waiting messages.` : `from the first ${read} waiting messages read (a sample).`));
}
