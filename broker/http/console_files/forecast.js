// The load that falls due over the next hour, by minute: the topic's forecast
// (GET /v1/topics/{topic}/forecast), counted by storage from its time index,
// never by reading the messages, so it costs the same on a topic of any size.
import { call, enc } from './api.js';
import { h } from './ui.js';

export const MINUTES = 60;

export async function dueNextHour(topic) {
  const answer = await call('GET', `/v1/topics/${enc(topic)}/forecast`
    + `?horizon_ms=${MINUTES * 60000}&step_ms=60000`);
  const bins = new Array(MINUTES).fill(0);
  (answer.counts || []).slice(0, MINUTES).forEach((count, minute) => { bins[minute] = Number(count); });
  return { bins };
}

const SVG = 'http://www.w3.org/2000/svg';

export function chart({ bins }) {
  const top = Math.max(1, ...bins);
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', 'chart');
  svg.setAttribute('viewBox', `0 0 ${MINUTES * 10} 100`);
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('role', 'img');
  const total = bins.reduce((a, b) => a + b, 0);
  svg.setAttribute('aria-label', `${total} messages due in the next hour, at most ${top} in one minute`);
  bins.forEach((count, minute) => {
    const rect = document.createElementNS(SVG, 'rect');
    const height = (count / top) * 100;
    rect.setAttribute('x', String(minute * 10 + 1));
    rect.setAttribute('width', '8');
    rect.setAttribute('y', String(100 - height));
    rect.setAttribute('height', String(height));
    const title = document.createElementNS(SVG, 'title');
    title.textContent = `+${minute} min: ${count}`;
    rect.append(title);
    svg.append(rect);
  });
  const peak = top === 1 && !total ? 0 : top;
  // The axes, as text beside the drawing (the SVG is stretched to fit: text in it would be too).
  const yTitle = h('div', { class: 'axis-title', 'aria-hidden': 'true' }, 'messages a minute');
  const yAxis = h('div', { class: 'axis-y', 'aria-hidden': 'true' },
    h('span', {}, String(peak)), h('span', {}, '0'));
  const xAxis = h('div', { class: 'axis-x', 'aria-hidden': 'true' },
    ['now', '+15 min', '+30 min', '+45 min', '+60 min'].map((t) => h('span', {}, t)));
  return h('figure', {}, yTitle, h('div', { class: 'plot' }, yAxis, svg, h('span'), xAxis),
    h('figcaption', { class: 'muted' },
      `${total} due in the next hour (peak ${peak} a minute), by minute from now.`));
}
