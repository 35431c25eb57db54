// Small DOM helpers. Text always goes in as text nodes, never as HTML.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  el.append(...children.flat().filter((c) => c !== null && c !== undefined)
    .map((c) => (c instanceof Node ? c : document.createTextNode(String(c)))));
  return el;
}

// To the millisecond, as the broker schedules: 2033-05-18 03:33:20.123Z.
export function time(ms) {
  const n = Number(ms);
  if (!n) return '—';
  return new Date(n).toISOString().replace('T', ' ');
}

export function table(headers, rows) {
  return h('table', {},
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows));
}

export function say(node, text, kind = 'ok') {
  node.className = kind;
  node.textContent = text;
}

export function problemText(err) {
  return err && err.problem && err.problem.detail ? err.problem.detail : String(err && err.message || err);
}

// A topic's recent deliveries (the API's activity) as two cells: rate, lateness p99.
export function activityCells(a) {
  const rate = a ? Number(a.delivery_rate || 0) : null;
  const p99 = a && rate ? `${Number(a.lateness_p99_ms || 0).toFixed(1)} ms` : '—';
  const shown = (r) => (r >= 10 ? r.toFixed(0) : r >= 1 ? r.toFixed(1) : r ? r.toPrecision(2) : '0');
  return [
    h('td', { class: 'n' }, rate === null ? '?' : `${shown(rate)}/s`),
    h('td', { class: 'n' }, p99),
  ];
}

// A message's key as a cell's content: '—' for none.
export function keyText(key) {
  return key ? h('code', {}, key) : '—';
}

// A message's headers (name -> value), a "name: value" line each; '—' for none.
export function headerLines(headers) {
  const entries = Object.entries(headers || {});
  if (!entries.length) return '—';
  return h('ul', { class: 'headers' }, entries.map(([name, value]) => h('li', {}, h('code', {}, name), `: ${value}`)));
}
