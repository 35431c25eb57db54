// The cluster status call: brokers and their clock skew, consumers and the buckets they own.
import { call } from './api.js';
import { h, table, time } from './ui.js';

function ranges(buckets) {
  return (buckets || []).map((r) => (r.first === r.last ? `${r.first}` : `${r.first}–${r.last}`)).join(', ');
}

export function mount(view) {
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  view.replaceChildren(h('h1', {}, 'Cluster'), body);
  return {
    async refresh() {
      const s = await call('GET', '/v1/cluster');
      const brokers = (s.brokers || []).map((b) => h('tr', {},
        h('td', {}, b.id), h('td', {}, b.address), h('td', {}, time(b.started_at_ms)),
        h('td', { class: 'n' }, b.skew_ms === undefined || b.skew_ms === null ? 'not measured' : `${b.skew_ms} ms`)));
      const consumers = [];
      for (const t of s.topics || []) {
        for (const c of t.consumers || []) {
          consumers.push(h('tr', {}, h('td', {}, t.name), h('td', { class: 'n' }, String(t.buckets)),
            h('td', {}, c.id), h('td', {}, c.broker), h('td', {}, ranges(c.buckets))));
        }
      }
      body.replaceChildren(
        h('p', {}, `Mode ${s.mode}${s.cluster ? ` (cluster ${s.cluster})` : ''}; answered by ${s.broker} at ${time(s.now_ms)}; `,
          h('span', { class: s.healthy ? 'ok' : 'error' }, s.healthy ? 'healthy' : 'etcd unreachable')),
        h('h2', {}, 'Brokers'),
        table(['Broker', 'Address', 'Started', 'Clock skew'], brokers),
        h('h2', {}, 'Consumers and bucket ownership'),
        consumers.length
          ? table(['Topic', 'Buckets', 'Consumer', 'Broker', 'Owns buckets'], consumers)
          : h('p', { class: 'muted' }, 'No consumers attached.'));
    },
  };
}
