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

export function time(ms) {
  const n = Number(ms);
  if (!n) return '—';
  return new Date(n).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
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
