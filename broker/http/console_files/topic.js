// One topic: counts and recent deliveries, settings (rate cap, lease and max
// deliveries editable by an admin, who may also pause and resume it), the load due over the next hour, a paged
// browse by due time, find by id with move and cancel (each quoting the
// version shown), the dead timeline with redrive, and the busiest keys with
// the limits per key (keys.js).
import { call, enc, permissions } from './api.js';
import { chart, dueNextHour } from './forecast.js';
import { busiest, limitsForm, perKeyText } from './keys.js';
import { activityCells, h, problemText, say, table, time } from './ui.js';

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
  const summary = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const settings = h('div');
  const settingsForm = h('div');
  const pauseControl = h('div');
  const pauseStatus = h('p', { role: 'status' });
  const load = h('div', {}, h('p', { class: 'muted' }, 'Reading the timeline…'));
  const keys = h('div');
  const keyLimits = h('div');
  let keyForm = null;
  const found = h('div');
  const browse = h('div');
  const dead = h('div');
  const deadStatus = h('p', { role: 'status' });
  const browseAt = { stack: [], cursor: null, next: null }; // cursor: after {ts, id}; null: the first
  const deadAt = { stack: [], after: '', next: null, selected: new Set() };

  const idInput = h('input', { id: 'find-id', name: 'id', required: true });
  const findForm = h('form', { class: 'row', onsubmit: (e) => { e.preventDefault(); show(idInput.value); } },
    h('label', { for: 'find-id' }, 'Message id'), idInput, h('button', { type: 'submit' }, 'Find'));

  view.replaceChildren(
    h('p', {}, h('a', { href: '#/topics' }, '← Topics')),
    h('h1', {}, `Topic ${name}`), summary,
    h('h2', {}, 'Settings'), settings, pauseControl, settingsForm,
    h('h2', {}, 'Due over the next hour'), load,
    h('h2', {}, 'Busiest keys'), keys, keyLimits,
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

  // -- a page of live messages by due time (the timeline API's order: ties by id)
  async function readBrowse() {
    const after = browseAt.cursor
      ? `&after_timestamp_ms=${browseAt.cursor.ts}&after_id=${enc(browseAt.cursor.id)}` : '';
    const p = await call('GET', `${base}/timeline?limit=${PAGE}&without_payloads=true${after}`);
    const rows = p.messages || [];
    browseAt.next = p.done ? null : { ts: p.next_after_timestamp_ms, id: p.next_after_id };
    const pager = h('div', { class: 'row' },
      h('button', { type: 'button', disabled: !browseAt.stack.length, onclick: () => { browseAt.cursor = browseAt.stack.pop(); readBrowse(); } }, 'Previous'),
      h('button', { type: 'button', disabled: !browseAt.next, onclick: () => { browseAt.stack.push(browseAt.cursor); browseAt.cursor = browseAt.next; readBrowse(); } }, 'Next'));
    browse.replaceChildren(rows.length ? table(['Id', 'State', 'Due', 'Version', 'Deliveries'], rows.map((m) => h('tr', {},
      h('td', {}, h('a', { href: '#', onclick: (e) => { e.preventDefault(); show(m.id); } }, m.id)),
      h('td', {}, m.state), h('td', {}, time(m.timestamp_ms)), h('td', { class: 'n' }, String(m.version)),
      h('td', { class: 'n' }, String(m.deliveries))))) : h('p', { class: 'muted' }, 'No live messages.'),
    h('p', { class: 'muted' }, `Live messages by due time (a leased one at its lease expiry), ${PAGE} a page.`),
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

  // -- settings an admin may change: the rate cap, the lease, the max deliveries
  function renderSettingsForm(topic) {
    if (!may || !may.admin) { settingsForm.replaceChildren(); return; }
    if (settingsForm.childElementCount) return; // keep what is being typed
    const status = h('p', { role: 'status' });
    const s = topic.settings;
    const rate = h('input', { id: 'rate-cap', name: 'max_rate', inputmode: 'decimal', value: s.max_rate || '' });
    const lease = h('input', { id: 'lease-ms', name: 'lease_ms', inputmode: 'numeric', value: s.lease_ms });
    const md = h('input', { id: 'max-deliveries', name: 'max_deliveries', inputmode: 'numeric', value: s.max_deliveries || 0 });
    const save = async (body, done) => {
      try {
        say(status, done((await call('PATCH', base, body)).settings));
      } catch (err) { say(status, `Not changed: ${problemText(err)}`, 'error'); }
      await page.refresh();
    };
    const capText = (t) => (t.max_rate ? `Rate cap set to ${t.max_rate}/s.` : 'Rate cap lifted.');
    const whole = (text) => (/^[0-9]+$/.test(text.trim()) ? Number(text) : NaN);
    settingsForm.replaceChildren(
      h('form', { class: 'row', onsubmit: (e) => {
        e.preventDefault();
        const value = Number(rate.value);
        if (!(value > 0)) { say(status, 'The rate cap is a number of deliveries a second, above 0.', 'error'); return; }
        save({ max_rate: value }, capText);
      } },
      h('label', { for: 'rate-cap' }, 'Rate cap (deliveries/s)'), rate,
      h('button', { type: 'submit' }, 'Set cap'),
      h('button', { type: 'button', onclick: () => save({ no_max_rate: true }, capText) }, 'Lift cap')),
      h('form', { class: 'row', onsubmit: (e) => {
        e.preventDefault();
        const ms = whole(lease.value);
        const limit = whole(md.value);
        if (!(ms > 0)) { say(status, 'The lease is a whole number of milliseconds, above 0.', 'error'); return; }
        if (Number.isNaN(limit)) { say(status, 'Max deliveries is a whole number: 0 for no limit, 1 for at most once.', 'error'); return; }
        save({ lease_ms: ms, max_deliveries: limit },
          (t) => `Lease set to ${t.lease_ms} ms; max deliveries ${t.max_deliveries ? t.max_deliveries : 'no limit'}.`);
      } },
      h('label', { for: 'lease-ms' }, 'Lease (ms)'), lease,
      h('label', { for: 'max-deliveries' }, 'Max deliveries (0: no limit)'), md,
      h('button', { type: 'submit' }, 'Set lease and max deliveries')),
      h('p', { class: 'muted' }, 'A new lease applies to consumers that connect from now on; max deliveries to each delivery from now on.'),
      status);
  }

  // -- pause and resume: shown as the topic is now, on every refresh
  function renderPause(topic) {
    if (!may || !may.admin) { pauseControl.replaceChildren(); return; }
    const paused = Boolean(topic.settings.paused);
    const act = async () => {
      try {
        await call('POST', `${base}/${paused ? 'resume' : 'pause'}`, {});
        say(pauseStatus, paused
          ? 'Resumed: the backlog is delivered in due order.'
          : 'Paused: produces are stored, nothing is delivered until it is resumed.');
      } catch (err) { say(pauseStatus, `Not changed: ${problemText(err)}`, 'error'); }
      await page.refresh();
    };
    pauseControl.replaceChildren(h('div', { class: 'row' },
      h('button', { type: 'button', id: 'pause-topic', onclick: act }, paused ? 'Resume' : 'Pause')),
    pauseStatus);
  }

  const page = {
    async refresh() {
      may = await permissions(name);
      const d = await call('GET', base);
      const s = d.topic.settings;
      const c = d.counts || {};
      summary.replaceChildren(table(['Waiting', 'Due', 'Leased', 'Dead', 'Consumers', 'Delivery rate', 'Lateness p99', 'Next due'], [h('tr', {},
        h('td', { class: 'n' }, String(c.waiting ?? 0)), h('td', { class: 'n' }, String(c.due ?? 0)),
        h('td', { class: 'n' }, String(c.leased ?? 0)), h('td', { class: 'n' }, String(c.dead ?? 0)),
        h('td', { class: 'n' }, String(d.consumers ?? 0)), activityCells(d.activity), h('td', {}, time(d.next_due_ms)))]));
      const state = s.paused ? `paused since ${time(s.paused_at_ms)}` : 'running';
      settings.replaceChildren(table(['State', 'Kind', 'Buckets', 'Lease', 'Max deliveries', 'Rate cap', 'Per key', 'Dedup window', 'Expiry'], [h('tr', {},
        h('td', {}, state), h('td', {}, s.kind), h('td', { class: 'n' }, String(s.buckets)), h('td', { class: 'n' }, `${s.lease_ms} ms`),
        h('td', { class: 'n' }, s.max_deliveries ? String(s.max_deliveries) : 'no limit'),
        h('td', { class: 'n' }, s.max_rate ? `${s.max_rate}/s` : 'none'),
        h('td', { class: 'n' }, perKeyText(s)),
        h('td', { class: 'n' }, `${s.dedup_window_ms} ms`), h('td', { class: 'n' }, s.expiry_ms ? `${s.expiry_ms} ms` : 'none'))]));
      renderSettingsForm(d.topic);
      renderPause(d.topic);
      if (may && may.admin && s.kind === 'timeline') {
        if (!keyForm) { keyForm = limitsForm(base, d.topic, () => page.refresh()); keyLimits.replaceChildren(keyForm.form); }
        await keyForm.readOverrides();
      }
      keys.replaceChildren(await busiest(base));
      await Promise.all([readBrowse(), readDead()]);
      // The chart reads most: it comes after the tables, so they never wait for it.
      if (polls % CHART_EVERY === 0) load.replaceChildren(chart(await dueNextHour(name)));
      polls += 1;
    },
  };
  return page;
}
