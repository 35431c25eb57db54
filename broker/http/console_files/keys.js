// A topic's keys: the busiest (GET /v1/topics/{topic}/keys: due backlog, held,
// lateness, limits), the topic's limits per key and each key's override,
// editable by an admin (PATCH the topic; PATCH / DELETE .../keys/{key}/limits).
import { call, enc } from './api.js';
import { h, problemText, say, table } from './ui.js';

const rate = (r) => (r ? `${r}/s` : 'none');
const late = (k) => (Number(k.due || 0) ? `${Number(k.lateness_ms || 0)} ms` : '—');

export function perKeyText(s) {
  if (!s.key_concurrency && !s.key_rate) return 'none';
  const burst = s.key_rate && s.key_burst ? ` burst ${s.key_burst}` : '';
  return `${s.key_concurrency || 'any'} held, ${rate(s.key_rate)}${burst}`;
}

export async function busiest(base) {
  const { keys = [] } = await call('GET', `${base}/keys?limit=10`);
  if (!keys.length) return h('p', { class: 'muted' }, 'No key has messages due or held.');
  return table(['Key', 'Due', 'Held', 'Late', 'Concurrency', 'Rate'], keys.map((k) => h('tr', {},
    h('td', {}, k.key), h('td', { class: 'n' }, String(k.due ?? 0)), h('td', { class: 'n' }, String(k.held ?? 0)),
    h('td', { class: 'n' }, late(k)), h('td', { class: 'n' }, k.concurrency ? String(k.concurrency) : 'none'),
    h('td', { class: 'n' }, rate(k.rate)))));
}

function number(text) {
  const t = text.trim();
  return t === '' ? undefined : Number(t);
}

// The admin's forms: the topic's limits per key, and one key's override.
export function limitsForm(base, topic, refresh) {
  const status = h('p', { role: 'status' });
  const s = topic.settings;
  const conc = h('input', { id: 'key-concurrency', name: 'key_concurrency', inputmode: 'numeric', value: s.key_concurrency || 0 });
  const r = h('input', { id: 'key-rate', name: 'key_rate', inputmode: 'decimal', value: s.key_rate || 0 });
  const burst = h('input', { id: 'key-burst', name: 'key_burst', inputmode: 'numeric', value: s.key_burst || 0 });
  const key = h('input', { id: 'override-key', name: 'key' });
  const oConc = h('input', { id: 'override-concurrency', name: 'concurrency', inputmode: 'numeric' });
  const oRate = h('input', { id: 'override-rate', name: 'rate', inputmode: 'decimal' });
  const overrides = h('div');
  const send = async (method, path, body, done) => {
    try {
      say(status, done(await call(method, path, body)));
    } catch (err) { say(status, `Not changed: ${problemText(err)}`, 'error'); }
    await refresh();
  };
  async function readOverrides() {
    const { limits = [] } = await call('GET', `${base}/key-limits`);
    overrides.replaceChildren(limits.length ? table(['Key', 'Concurrency', 'Rate', ''], limits.map((o) => h('tr', {},
      h('td', {}, o.key), h('td', { class: 'n' }, o.concurrency ?? 'the topic\'s'),
      h('td', { class: 'n' }, o.rate === undefined ? 'the topic\'s' : rate(o.rate)),
      h('td', {}, h('button', { type: 'button', onclick: () => send('DELETE', `${base}/keys/${enc(o.key)}/limits`, undefined, () => `Override of ${o.key} removed.`) }, 'Remove'))))) : h('p', { class: 'muted' }, 'No key has an override.'));
  }
  const form = h('div', {},
    h('form', { class: 'row', onsubmit: (e) => {
      e.preventDefault();
      const body = { key_concurrency: number(conc.value) ?? 0, key_rate: number(r.value) ?? 0, key_burst: number(burst.value) ?? 0 };
      if (Object.values(body).some((v) => !(v >= 0))) { say(status, 'Limits per key are numbers, 0 or more (0: no limit).', 'error'); return; }
      send('PATCH', base, body, (t) => `Per key: ${perKeyText(t.settings)}.`);
    } },
    h('label', { for: 'key-concurrency' }, 'Per key: held at once (0: any)'), conc,
    h('label', { for: 'key-rate' }, 'deliveries/s (0: any)'), r,
    h('label', { for: 'key-burst' }, 'burst'), burst,
    h('button', { type: 'submit' }, 'Set limits per key')),
    h('form', { class: 'row', onsubmit: (e) => {
      e.preventDefault();
      const body = { concurrency: number(oConc.value), rate: number(oRate.value) };
      if (!key.value) { say(status, 'Name the key to override.', 'error'); return; }
      send('PATCH', `${base}/keys/${enc(key.value)}/limits`, body,
        (v) => `Key ${v.key}: ${v.concurrency || 'any'} held, ${rate(v.rate)}.`);
    } },
    h('label', { for: 'override-key' }, 'Key'), key,
    h('label', { for: 'override-concurrency' }, 'held at once'), oConc,
    h('label', { for: 'override-rate' }, 'deliveries/s'), oRate,
    h('button', { type: 'submit' }, 'Override for this key')),
    overrides, status);
  return { form, readOverrides };
}
