// One topic: counts, settings (the rate cap editable by an admin), the load due
// over the next hour, a paged browse, find by id with move and cancel (each
// quoting the version shown), and the dead timeline with redrive.
import { call, enc, permissions } from './api.js';
import { chart, dueNextHour } from './forecast.js';
import { h, problemText, say, table, time } from './ui.js';

const PAGE = 50;
const CHART_EVERY = 6; // polls between chart updates: the chart reads many pages

function refusal(err, what) {
  const kind = err.problem && err.problem.kind;
  if (kind === 'StaleVersion') {
    return `Not ${what}: the message changed since it was read (stale version). `
      + 'It is shown again with its current version: check it, then retry.';
  }
  if (kind === 'Leased') return `Not ${what}: a consumer holds it right now (leased).`;
  return `Not ${what}: ${problemText(err)}`;
}

export function mount(view, name) {
  const base = `/v1/topics/${enc(name)}`;
  let may = null;
  let polls = 0;
  let buckets = 1;
  const summary = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const settings = h('div');
  const settingsForm = h('div');
  const load = h('div', {}, h('p', { class: 'muted' }, 'Reading the timeline…'));
  const found = h('div');
  const browse = h('div');
  const dead = h('div');
  const deadStatus = h('p', { role: 'status' });
  const browseAt = { stack: [], cursor: { bucket: 0, after: '' }, next: null };
  const deadAt = { stack: [], after: '', next: null, selected: new Set() };

  const idInput = h('input', { id: 'find-id', name: 'id', required: true });
  const findForm = h('form', { class: 'row', onsubmit: (e) => { e.preventDefault(); show(idInput.value); } },
    h('label', { for: 'find-id' }, 'Message id'), idInput, h('button', { type: 'submit' }, 'Find'));

  view.replaceChildren(
    h('p', {}, h('a', { href: '#/topics' }, '← Topics')),
    h('h1', {}, `Topic ${name}`), summary,
    h('h2', {}, 'Settings'), settings, settingsForm,
    h('h2', {}, 'Due over the next hour'), load,
    h('h2', {}, 'Find a message'), findForm, found,
    h('h2', {}, 'Messages'), browse,
    h('h2', {}, 'Dead timeline'), deadStatus, dead,
  );

  // -- one message: what was read stays on screen, with the version an action quotes
  async function show(id, note = '', kind = 'ok') {
    const status = h('p', { role: 'status' });
    if (note) say(status, note, kind);
    let m;
    try {
      m = await call('GET', `${base}/messages/${enc(id)}`);
    } catch (err) {
      say(status, err.status === 404 ? `No message ${id} in ${name}.` : problemText(err), 'error');
      found.replaceChildren(h('div', { class: 'card' }, status));
      return;
    }
    const when = h('input', { id: 'move-to', name: 'due', value: new Date(Number(m.timestamp_ms)).toISOString() });
    const actions = may && may.produce ? [
      h('form', { class: 'row', onsubmit: (e) => { e.preventDefault(); move(m, when.value); } },
        h('label', { for: 'move-to' }, 'New due time (UTC)'), when,
        h('button', { type: 'submit' }, `Move (version ${m.version})`)),
      h('div', { class: 'row' }, h('button', { type: 'button', onclick: () => cancel(m) }, `Cancel (version ${m.version})`)),
    ] : [];
    found.replaceChildren(h('div', { class: 'card', id: 'message' },
      h('p', {}, h('strong', {}, m.id), ` — ${m.state}, due ${time(m.timestamp_ms)}, version ${m.version}, `
        + `${m.deliveries} deliveries${m.lease_owner ? `, leased by ${m.lease_owner}` : ''}`),
      h('p', {}, 'Payload: ', h('code', {}, m.payload !== undefined ? m.payload : `(base64) ${m.payload_base64 || ''}`)),
      h('p', { class: 'muted' }, `As read at ${time(Date.now())}; Find again to reload.`),
      actions, status));
  }

  async function move(m, text) {
    const ms = Date.parse(text);
    if (Number.isNaN(ms)) { await show(m.id, `Not moved: "${text}" is not a time.`, 'error'); return; }
    try {
      const done = await call('POST', `${base}/messages/${enc(m.id)}/move`, { version: m.version, timestamp_ms: ms });
      await show(m.id, `Moved to ${time(done.timestamp_ms)}; now version ${done.version}.`);
    } catch (err) {
      await show(m.id, refusal(err, 'moved'), 'error');
    }
    await page.refresh();
  }

  async function cancel(m) {
    try {
      await call('POST', `${base}/messages/${enc(m.id)}/cancel`, { version: m.version });
      found.replaceChildren(h('div', { class: 'card' }, h('p', { role: 'status', class: 'ok' }, `Cancelled ${m.id}.`)));
    } catch (err) {
      await show(m.id, refusal(err, 'cancelled'), 'error');
    }
    await page.refresh();
  }

  // -- a page of messages, a bucket at a time in id order (the scan's), shown by due time
  async function readBrowse() {
    const rows = [];
    let { bucket, after } = browseAt.cursor;
    while (rows.length < PAGE && bucket < buckets) {
      const p = await call('GET', `${base}/buckets/${bucket}/messages?limit=${PAGE - rows.length}`
        + `&states=waiting&states=due&states=leased&without_payloads=true&after_id=${enc(after)}`);
      rows.push(...(p.messages || []));
      if (p.done) { bucket += 1; after = ''; } else after = p.next_after_id;
    }
    browseAt.next = bucket < buckets ? { bucket, after } : null;
    rows.sort((a, b) => Number(a.timestamp_ms) - Number(b.timestamp_ms));
    const pager = h('div', { class: 'row' },
      h('button', { type: 'button', disabled: !browseAt.stack.length, onclick: () => { browseAt.cursor = browseAt.stack.pop(); readBrowse(); } }, 'Previous'),
      h('button', { type: 'button', disabled: !browseAt.next, onclick: () => { browseAt.stack.push(browseAt.cursor); browseAt.cursor = browseAt.next; readBrowse(); } }, 'Next'));
    browse.replaceChildren(rows.length ? table(['Id', 'State', 'Due', 'Version', 'Deliveries'], rows.map((m) => h('tr', {},
      h('td', {}, h('a', { href: '#', onclick: (e) => { e.preventDefault(); show(m.id); } }, m.id)),
      h('td', {}, m.state), h('td', {}, time(m.timestamp_ms)), h('td', { class: 'n' }, String(m.version)),
      h('td', { class: 'n' }, String(m.deliveries))))) : h('p', { class: 'muted' }, 'No live messages.'),
    h('p', { class: 'muted' }, 'A page reads the buckets in turn, in id order (the paged scan); each page is sorted by due time.'),
    pager);
  }

  // -- the dead timeline, a page at a time by id; redrive the selected ones or all
  async function redrive(ids) {
    try {
      const done = await call('POST', `${base}/dead/redrive`, { ids });
      say(deadStatus, `Redriven: ${done.redriven ?? 0}.`);
      deadAt.selected.clear();
    } catch (err) {
      say(deadStatus, `Not redriven: ${problemText(err)}`, 'error');
    }
    await page.refresh();
  }

  async function readDead() {
    const { messages = [] } = await call('GET', `${base}/dead?limit=${PAGE}&after_id=${enc(deadAt.after)}`);
    deadAt.next = messages.length === PAGE ? messages[messages.length - 1].id : null;
    const admin = may && may.admin;
    const rows = messages.map((m) => h('tr', {},
      admin ? h('td', {}, h('input', {
        type: 'checkbox', 'aria-label': `select ${m.id}`, checked: deadAt.selected.has(m.id),
        onchange: (e) => { if (e.target.checked) deadAt.selected.add(m.id); else deadAt.selected.delete(m.id); },
      })) : null,
      h('td', {}, m.id), h('td', {}, time(m.timestamp_ms)), h('td', { class: 'n' }, String(m.deliveries))));
    const headers = [...(admin ? [''] : []), 'Id', 'Due', 'Deliveries'];
    dead.replaceChildren(
      rows.length ? table(headers, rows) : h('p', { class: 'muted' }, 'No dead messages.'),
      h('div', { class: 'row' },
        h('button', { type: 'button', disabled: !deadAt.stack.length, onclick: () => { deadAt.after = deadAt.stack.pop(); readDead(); } }, 'Previous'),
        h('button', { type: 'button', disabled: !deadAt.next, onclick: () => { deadAt.stack.push(deadAt.after); deadAt.after = deadAt.next; readDead(); } }, 'Next'),
        admin && rows.length ? h('button', { type: 'button', onclick: () => redrive([...deadAt.selected]), disabled: false }, 'Redrive selected') : null,
        admin && rows.length ? h('button', { type: 'button', onclick: () => redrive([]) }, 'Redrive all') : null));
  }

  // -- settings: the rate cap is the one the API changes; an admin gets the form
  function renderSettingsForm(topic) {
    if (!may || !may.admin) { settingsForm.replaceChildren(); return; }
    if (settingsForm.childElementCount) return; // keep what is being typed
    const status = h('p', { role: 'status' });
    const rate = h('input', { id: 'rate-cap', name: 'max_rate', inputmode: 'decimal', value: topic.settings.max_rate || '' });
    const save = async (body) => {
      try {
        const t = await call('PATCH', base, body);
        say(status, t.settings.max_rate ? `Rate cap set to ${t.settings.max_rate}/s.` : 'Rate cap lifted.');
      } catch (err) { say(status, `Not changed: ${problemText(err)}`, 'error'); }
      await page.refresh();
    };
    settingsForm.replaceChildren(h('form', { class: 'row', onsubmit: (e) => {
      e.preventDefault();
      const value = Number(rate.value);
      if (!(value > 0)) { say(status, 'The rate cap is a number of deliveries a second, above 0.', 'error'); return; }
      save({ max_rate: value });
    } },
    h('label', { for: 'rate-cap' }, 'Rate cap (deliveries/s)'), rate,
    h('button', { type: 'submit' }, 'Set cap'),
    h('button', { type: 'button', onclick: () => save({ no_max_rate: true }) }, 'Lift cap')), status);
  }

  const page = {
    async refresh() {
      may = await permissions(name);
      const d = await call('GET', base);
      const s = d.topic.settings;
      const c = d.counts || {};
      buckets = s.buckets || 1;
      summary.replaceChildren(table(['Waiting', 'Due', 'Leased', 'Dead', 'Consumers', 'Next due'], [h('tr', {},
        h('td', { class: 'n' }, String(c.waiting ?? 0)), h('td', { class: 'n' }, String(c.due ?? 0)),
        h('td', { class: 'n' }, String(c.leased ?? 0)), h('td', { class: 'n' }, String(c.dead ?? 0)),
        h('td', { class: 'n' }, String(d.consumers ?? 0)), h('td', {}, time(d.next_due_ms)))]));
      settings.replaceChildren(table(['Kind', 'Buckets', 'Lease', 'Max deliveries', 'Rate cap', 'Dedup window', 'Expiry'], [h('tr', {},
        h('td', {}, s.kind), h('td', { class: 'n' }, String(s.buckets)), h('td', { class: 'n' }, `${s.lease_ms} ms`),
        h('td', { class: 'n' }, s.max_deliveries ? String(s.max_deliveries) : 'no limit'),
        h('td', { class: 'n' }, s.max_rate ? `${s.max_rate}/s` : 'none'),
        h('td', { class: 'n' }, `${s.dedup_window_ms} ms`), h('td', { class: 'n' }, s.expiry_ms ? `${s.expiry_ms} ms` : 'none'))]));
      renderSettingsForm(d.topic);
      await Promise.all([readBrowse(), readDead()]);
      // The chart reads most: it comes after the tables, so they never wait for it.
      if (polls % CHART_EVERY === 0) load.replaceChildren(chart(await dueNextHour(name)));
      polls += 1;
    },
  };
  return page;
}
