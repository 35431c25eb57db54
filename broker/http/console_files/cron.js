// Cron entries of every topic, with their next occurrences: pause, resume, delete
// (shown to a principal with the produce grant on the topic).
import { call, enc, permissions } from './api.js';
import { h, problemText, say, table, time } from './ui.js';

const UPCOMING = 3;

export function mount(view) {
  const status = h('p', { role: 'status' });
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const armed = new Set(); // entries whose Delete was clicked once: the second click deletes
  view.replaceChildren(h('h1', {}, 'Cron'), status, body);

  async function act(what, entry, run) {
    try {
      await run();
      say(status, `${what}: ${entry.topic}/${entry.id}`);
    } catch (err) {
      const stale = err.problem && err.problem.kind === 'StaleVersion';
      say(status, stale ? `Not done: ${entry.topic}/${entry.id} changed since it was shown; it is shown again now.`
        : `Not done: ${problemText(err)}`, 'error');
    }
    await page.refresh();
  }

  function controls(entry, path) {
    const key = `${entry.topic}/${entry.id}`;
    const version = { version: entry.version };
    return [
      entry.paused
        ? h('button', { type: 'button', onclick: () => act('Resumed', entry, () => call('POST', `${path}/resume`, version)) }, 'Resume')
        : h('button', { type: 'button', onclick: () => act('Paused', entry, () => call('POST', `${path}/pause`, version)) }, 'Pause'),
      h('button', {
        type: 'button',
        onclick: () => {
          if (!armed.has(key)) { armed.add(key); page.refresh(); return; }
          armed.delete(key);
          act('Deleted', entry, () => call('DELETE', `${path}?version=${entry.version}`));
        },
      }, armed.has(key) ? 'Confirm delete' : 'Delete'),
    ];
  }

  const page = {
    async refresh() {
      const { topics = [] } = await call('GET', '/v1/topics');
      const rows = [];
      for (const t of topics) {
        const { entries = [] } = await call('GET', `/v1/topics/${enc(t.name)}/cron?limit=1000`);
        if (!entries.length) continue;
        const may = await permissions(t.name);
        const infos = await Promise.all(entries.map((e) => call('GET', `/v1/topics/${enc(t.name)}/cron/${enc(e.id)}`)));
        infos.forEach(({ entry, upcoming_ms: upcoming = [] }) => {
          const path = `/v1/topics/${enc(t.name)}/cron/${enc(entry.id)}`;
          rows.push(h('tr', {},
            h('td', {}, t.name), h('td', {}, entry.id), h('td', {}, h('code', {}, entry.schedule)),
            h('td', {}, entry.timezone || 'UTC'), h('td', {}, entry.paused ? 'paused' : 'active'),
            h('td', {}, upcoming.slice(0, UPCOMING).map((ms) => h('div', {}, time(ms)))),
            h('td', { class: 'n' }, String(entry.version)),
            h('td', {}, may.produce ? controls(entry, path) : '')));
        });
      }
      body.replaceChildren(rows.length
        ? table(['Topic', 'Entry', 'Schedule', 'Time zone', 'State', 'Next occurrences', 'Version', ''], rows)
        : h('p', { class: 'muted' }, 'No cron entries.'));
    },
  };
  return page;
}
