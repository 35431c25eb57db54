// Every topic the caller may describe, with its counts by state and what this
// broker delivered of it lately (the list's activity: rate and lateness p99).
import { call, enc } from './api.js';
import { activityCells, h, table, time } from './ui.js';

const HEADERS = ['Topic', 'Kind', 'Buckets', 'Waiting', 'Due', 'Leased', 'Dead', 'Consumers',
  'Delivery rate', 'Lateness p99', 'Next due', 'Rate cap'];

export function mount(view) {
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  view.replaceChildren(
    h('h1', {}, 'Topics'),
    body,
    h('p', { class: 'muted' },
      'Consumers, delivery rate and lateness p99: those of the broker serving this console, ',
      'over the last minute (its metrics). Counts: the storage\'s, for the whole cluster.'),
  );
  return {
    async refresh() {
      const { topics = [], activity = [] } = await call('GET', '/v1/topics');
      const described = await Promise.all(
        topics.map((t) => call('GET', `/v1/topics/${enc(t.name)}`).catch(() => null)));
      const rows = topics.map((t, i) => {
        const d = described[i];
        const c = (d && d.counts) || {};
        const s = t.settings || {};
        const n = (x) => h('td', { class: 'n' }, d ? String(x ?? 0) : '?');
        return h('tr', {},
          h('td', {}, h('a', { href: `#/topic/${enc(t.name)}` }, t.name)),
          h('td', {}, (s.kind || 'timeline') + (s.paused ? ' (paused)' : '')),
          h('td', { class: 'n' }, String(s.buckets ?? '')),
          n(c.waiting), n(c.due), n(c.leased), n(c.dead), n(d && d.consumers),
          activityCells(activity[i]),
          h('td', {}, d ? time(d.next_due_ms) : '?'),
          h('td', { class: 'n' }, s.max_rate ? `${s.max_rate}/s` : 'none'));
      });
      body.replaceChildren(rows.length ? table(HEADERS, rows) : h('p', { class: 'muted' }, 'No topics.'));
    },
  };
}
