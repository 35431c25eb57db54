// The console: sign-in, a page per hash route, and polling that keeps the
// shown page current (every POLL_MS; the load chart less often).
import { ApiError, call, setCsrf } from './api.js';
import * as cluster from './cluster.js';
import * as cron from './cron.js';
import * as outboxes from './outboxes.js';
import * as bridges from './bridges.js';
import * as topic from './topic.js';
import * as topics from './topics.js';
import { h, problemText } from './ui.js';

const POLL_MS = 5000;
const view = document.getElementById('view');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
const signIn = document.getElementById('sign-in');
const signOut = document.getElementById('sign-out');
const signInError = document.getElementById('sign-in-error');
let timer = null;
let page = null;

function stopPolling() {
  if (timer !== null) clearInterval(timer);
  timer = null;
  page = null;
}

function showSignIn(message = '') {
  stopPolling();
  setCsrf('');
  view.replaceChildren();
  nav.hidden = true;
  signOut.hidden = true;
  who.textContent = '';
  signIn.hidden = false;
  signInError.textContent = message;
  document.getElementById('token').focus();
}

function signedIn(session) {
  setCsrf(session.csrf_token);
  who.textContent = session.anonymous ? 'anonymous (broker without --auth)' : `signed in as ${session.principal}`;
  signOut.hidden = session.anonymous;
  signIn.hidden = true;
  nav.hidden = false;
  route();
}

function failed(err) {
  if (err instanceof ApiError && err.status === 401) {
    showSignIn('Your session has ended: sign in again.');
    return;
  }
  let banner = document.getElementById('page-error');
  if (!banner) {
    banner = h('p', { id: 'page-error', class: 'error', role: 'alert' });
    view.prepend(banner);
  }
  banner.textContent = problemText(err);
}

async function refresh() {
  const shown = page;
  if (!shown) return;
  try {
    await shown.refresh();
    if (shown === page) document.getElementById('page-error')?.remove();
  } catch (err) {
    if (shown === page) failed(err);
  }
}

function route() {
  stopPolling();
  const [, name = 'topics', ...rest] = location.hash.split('/');
  const arg = rest.map(decodeURIComponent).join('/');
  const pages = { topics, topic, cron, cluster, outboxes, bridges };
  const chosen = pages[name] || topics;
  for (const link of nav.querySelectorAll('a')) {
    const current = link.getAttribute('href') === `#/${name === 'topic' ? 'topics' : name}`;
    if (current) link.setAttribute('aria-current', 'page'); else link.removeAttribute('aria-current');
  }
  page = chosen.mount(view, arg, { failed });
  refresh();
  timer = setInterval(refresh, POLL_MS);
}

signIn.addEventListener('submit', async (event) => {
  event.preventDefault();
  const input = document.getElementById('token');
  const token = input.value;
  input.value = '';
  try {
    signedIn(await call('POST', '/console/session', { token }));
  } catch (err) {
    signInError.textContent = problemText(err);
  }
});

signOut.addEventListener('click', async () => {
  try { await call('DELETE', '/console/session'); } finally { showSignIn(); }
});

window.addEventListener('hashchange', () => { if (!signIn.hidden) return; route(); });

(async () => {
  try {
    signedIn(await call('GET', '/console/session'));
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) showSignIn();
    else view.replaceChildren(h('p', { class: 'error', role: 'alert' }, problemText(err)));
  }
})();
