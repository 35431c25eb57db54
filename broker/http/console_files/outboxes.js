// The transactional outboxes this broker relays (--outbox): rows waiting, the
// oldest one's age, and the parked rows with their reasons.
import { call } from './api.js';
import { h, table, time } from './ui.js';

function age(s) {
  if (s === null || s === undefined) return '—';
  return s >= 1 ? `${Number(s).toFixed(1)} s` : `${(Number(s) * 1000).toFixed(0)} ms`;
}

function one(o) {
  if (o.error) return [h('h2', {}, o.name), h('p', { class: 'error' }, o.error)];
  const parked = (o.parked_rows || []).map((r) => h('tr', {},
    h('td', { class: 'n' }, String(r.seq)), h('td', {}, r.op), h('td', {}, r.topic), h('td', {}, r.id),
    h('td', {}, time(r.parked_at_ms)), h('td', {}, r.reason)));
  return [
    h('h2', {}, o.name),
    h('p', {}, `Waiting ${o.waiting}, the oldest for ${age(o.oldest_age_s)}; parked ${o.parked}.`),
    parked.length ? table(['Row', 'Operation', 'Topic', 'Message', 'Parked', 'Reason'], parked) : null,
  ];
}

export function mount(view) {
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  view.replaceChildren(h('h1', {}, 'Outboxes'), body);
  return {
    async refresh() {
      const found = (await call('GET', '/v1/outboxes')).outboxes || [];
      body.replaceChildren(...(found.length
        ? found.flatMap(one)
        : [h('p', { class: 'muted' }, 'This broker relays no outbox (dejaq broker --outbox URL).')]));
    },
  };
}
