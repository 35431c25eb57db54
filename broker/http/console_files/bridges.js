// The bridges this broker runs (--bridges): each one's source, topic and sink,
// the lag at its source, what it holds, has published, and its errors.
import { call } from './api.js';
import { h, table } from './ui.js';

function row(b) {
  if (b.error) return h('tr', {}, h('td', {}, b.name), h('td', { class: 'error', colspan: '9' }, b.error));
  const n = (v) => h('td', { class: 'n' }, String(v ?? 0));
  return h('tr', {},
    h('td', {}, b.name), h('td', {}, b.source), h('td', {}, b.topic), h('td', {}, b.sink || '—'),
    n(b.lag), n(b.held), n(b.accepted), n(b.published), n(b.unreadable), n(b.errors));
}

export function mount(view) {
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  view.replaceChildren(h('h1', {}, 'Bridges'), body);
  return {
    async refresh() {
      const found = (await call('GET', '/v1/bridges')).bridges || [];
      body.replaceChildren(found.length
        ? table(['Bridge', 'Source', 'Topic', 'Sink', 'Lag', 'Held', 'Accepted', 'Published',
          'Unreadable', 'Errors'], found.map(row))
        : h('p', { class: 'muted' }, 'This broker runs no bridge (dejaq broker --bridges FILE).'));
    },
  };
}
