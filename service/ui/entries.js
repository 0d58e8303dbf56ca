// The entries page: GET /v1/entries with the server's filter, sort and
// paging (a million entries never reach the browser), an entry's record and
// manifest (GET /v1/entries/{key}) on click, and two keys explained side by
// side (GET /v1/explain).
//
// In key order the pages follow a cursor (after=, next_after): each costs
// what it shows, however large the store. The other orders page by offset,
// with a total. Unfiltered, kcached reads them from its stores' order index;
// filtered, the first page reads every entry on the server. Either way it
// keeps the listing's first 10,000 rows for the pages after it. Over several
// tiers the total is their entry count (total_estimated), shown as "about".
'use strict';

(() => {
  const { api, count, bytes, time, facts, row, el, showError } = kcache;
  const PAGE = 50;
  let offset = 0; // sorted orders
  let cursors = ['']; // key order: the after= of each page so far, for Previous
  let picked = []; // up to two keys picked for explain, oldest first

  const byKey = () => el('sort').value === 'key';

  function query() {
    const q = new URLSearchParams();
    q.set('limit', String(PAGE));
    q.set('sort', el('sort').value);
    if (byKey()) {
      q.set('after', cursors[cursors.length - 1]);
    } else {
      q.set('offset', String(offset));
    }
    for (const name of ['prefix', 'namespace', 'area']) {
      const value = el(name).value.trim();
      if (value) {
        q.set(name, value);
      }
    }
    return q;
  }

  const path = (key) => key.replace(/[^A-Za-z0-9._:+=-]/g, encodeURIComponent);

  async function showEntry(key) {
    // Action keys are path-safe (kcached does not decode a key in the path).
    const entry = await api('/v1/entries/' + path(key));
    el('detail-key').textContent = entry.key;
    const storage = entry.storage || {};
    const pairs = [
      ['producer', entry.producer || '–'],
      ['created', time(entry.created_ms)],
      ['size', bytes(storage.artifact_size)],
      ['stored size', bytes(storage.size)],
      ['hits', count(storage.hits)],
      ['last access', time(storage.last_access_ms)],
    ];
    for (const [name, value] of Object.entries(entry.metadata || {})) {
      pairs.push([name, value]);
    }
    facts(el('detail-facts'), pairs);
    const outputs = el('detail-outputs').tBodies[0];
    outputs.replaceChildren();
    for (const o of entry.outputs) {
      outputs.append(row([o.name, o.digest, bytes(o.size)], [2]));
    }
    el('detail-manifest').textContent = entry.manifest ? JSON.stringify(entry.manifest, null, 2) : 'none (not a kc1- key)';
    el('detail').hidden = false;
    el('detail').scrollIntoView({ block: 'nearest' });
  }

  function keyCell(entry) {
    if (entry.area !== 'ac') {
      const code = document.createElement('code');
      code.textContent = entry.key;
      return code;
    }
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'link key';
    button.textContent = entry.key;
    button.title = entry.key;
    button.addEventListener('click', () => showEntry(entry.key).catch(showError));
    return button;
  }

  // A/B: the last two action records picked fill the explain form.
  function pickCell(entry) {
    if (entry.area !== 'ac') {
      return '';
    }
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.className = 'pick';
    box.title = 'compare this key';
    box.checked = picked.includes(entry.key);
    box.addEventListener('change', () => {
      picked = picked.filter((k) => k !== entry.key);
      if (box.checked) {
        picked.push(entry.key);
      }
      picked = picked.slice(-2);
      for (const other of document.querySelectorAll('#entries input.pick')) {
        other.checked = picked.includes(other.closest('tr').dataset.key);
      }
      el('key-a').value = picked[0] || '';
      el('key-b').value = picked[1] || '';
      if (picked.length === 2) {
        explain().catch(showError);
      }
    });
    return box;
  }

  async function explain() {
    const a = el('key-a').value.trim();
    const b = el('key-b').value.trim();
    const e = await api('/v1/explain?' + new URLSearchParams({ a, b }));
    const differing = e.diffs.map((d) => d.component);
    el('explain-summary').textContent = e.same
      ? 'The keys are the same.'
      : `${differing.length} component${differing.length === 1 ? '' : 's'} differ${differing.length === 1 ? 's' : ''}: ` +
        differing.join(', ') + (e.kind === 'hash_details' ? ' (from the hash details the client stored)' : '');
    const body = el('explain-table').tBodies[0];
    body.replaceChildren();
    for (const c of e.components) {
      const name = document.createElement('span');
      name.textContent = c.component;
      if (c.differs) {
        const mark = document.createElement('span');
        mark.className = 'differs-mark';
        mark.textContent = ' ≠';
        name.append(mark);
      }
      const tr = row([name, c.a || '–', c.b || '–']);
      tr.dataset.component = c.component;
      tr.className = c.differs ? 'differs' : 'same';
      body.append(tr);
    }
    const details = el('explain-details');
    details.replaceChildren();
    for (const d of e.diffs) {
      for (const line of d.details) {
        const li = document.createElement('li');
        const what = document.createElement('strong');
        what.textContent = d.component + ': ';
        li.append(what, line);
        details.append(li);
      }
    }
    el('explained').hidden = false;
    el('explain').scrollIntoView({ block: 'nearest' });
  }

  async function load() {
    let list = await api('/v1/entries?' + query().toString());
    // A filter that drops rows (namespace=) may fill nothing in the 100,000
    // entries kcached reads per page: go on from where it stopped, a few
    // times, before saying so.
    let examined = list.examined || 0;
    for (let hop = 0; byKey() && list.entries.length === 0 && list.next_after && hop < 9; hop += 1) {
      cursors[cursors.length - 1] = list.next_after;
      el('summary').textContent = `searching… ${count(examined)} entries read`;
      list = await api('/v1/entries?' + query().toString());
      examined += list.examined || 0;
    }
    const body = el('entries').tBodies[0];
    body.replaceChildren();
    for (const e of list.entries) {
      const tr = row([pickCell(e), keyCell(e), e.area, bytes(e.artifact_size), bytes(e.size), count(e.hits), time(e.last_access_ms)], [3, 4, 5]);
      tr.dataset.key = e.key;
      body.append(tr);
    }
    if (list.entries.length === 0) {
      const empty = row(['', 'no entries match', '', '', '', '', '']);
      empty.className = 'empty';
      body.append(empty);
    }
    if (byKey()) {
      // No total in key order: counting would read every entry.
      const first = (cursors.length - 1) * PAGE;
      const more = list.next_after !== null && list.next_after !== undefined;
      el('summary').textContent = list.entries.length
        ? `${count(first + 1)}–${count(first + list.entries.length)}${more ? '' : ' (the last page)'} in key order`
        : more ? `none in the ${count(examined)} entries searched; go on with Next` : 'no entries match';
      el('next').dataset.after = more ? list.next_after : '';
      el('prev').disabled = cursors.length === 1;
      el('next').disabled = !more;
    } else {
      const first = list.entries.length ? offset + 1 : 0;
      const about = list.total_estimated ? 'about ' : '';
      el('summary').textContent = `${count(first)}–${count(offset + list.entries.length)} of ${about}${count(list.total)} entries`;
      el('prev').disabled = offset === 0;
      // An estimated total may fall short of the listing: a full page says more may follow.
      el('next').disabled = list.total_estimated
        ? list.entries.length < PAGE
        : offset + list.entries.length >= list.total;
    }
  }

  document.addEventListener('DOMContentLoaded', () => {
    const reload = () => load().catch(showError);
    el('search').addEventListener('submit', (event) => {
      event.preventDefault();
      offset = 0;
      cursors = [''];
      el('error').hidden = true;
      reload();
    });
    el('prev').addEventListener('click', () => {
      if (byKey()) {
        cursors.pop();
      } else {
        offset = Math.max(0, offset - PAGE);
      }
      reload();
    });
    el('next').addEventListener('click', () => {
      if (byKey()) {
        cursors.push(el('next').dataset.after);
      } else {
        offset += PAGE;
      }
      reload();
    });
    el('explain').addEventListener('submit', (event) => {
      event.preventDefault();
      el('error').hidden = true;
      explain().catch(showError);
    });
    el('detail-close').addEventListener('click', () => {
      el('detail').hidden = true;
    });
    kcache.start(load);
  });
})();
