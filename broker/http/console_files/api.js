// The console's only door to the broker: its HTTP API. A signed-in browser
// sends its session cookie (HttpOnly, never read here) and, on every call
// that changes something, the session's CSRF token in X-CSRF-Token.

let csrfToken = '';

export function setCsrf(token) { csrfToken = token || ''; }

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

export async function call(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  const answer = await fetch(path, {
    method, headers, credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await answer.text();
  const doc = text ? JSON.parse(text) : null;
  if (!answer.ok) throw new ApiError(answer.status, doc || {});
  return doc;
}

export const enc = encodeURIComponent;

// What the caller may do on a topic: controls the API would refuse are not shown.
export async function permissions(topic) {
  const me = await call('GET', `/v1/whoami?topic=${enc(topic)}`);
  const has = new Set(me.permissions || []);
  return {
    describe: has.has('describe'), produce: has.has('produce'), admin: has.has('admin'),
  };
}
