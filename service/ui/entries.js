// The entries page: GET /v1/entries with the server's filter, sort and
// paging (a million entries never reach the browser), and an entry's record
// and manifest (GET /v1/entries/{key}) on click.
'use strict';

(() => {
  const { api, count, bytes, time, facts, row, el } = kcache;
  const PAGE = 50;
  let offset = 0;

  function query() {
    const q = new URLSearchParams();
    q.set('limit', String(PAGE));
    q.set('offset', String(offset));
    q.set('sort', el('sort').value);
    for (const name of ['prefix', 'namespace', 'area']) {
      const value = el(name).value.trim();
      if (value) {
        q.set(name, value);
      }
    }
    return q;
  }

  async function showEntry(key) {
    // Action keys are path-safe (kcached does not decode a key in the path).
    const entry = await api('/v1/entries/' + key.replace(/[^A-Za-z0-9._:+=-]/g, encodeURIComponent));
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
    button.addEventListener('click', () => showEntry(entry.key).catch((error) => {
      el('error').textContent = String(error.message || error);
      el('error').hidden = false;
    }));
    return button;
  }

  async function load() {
    const list = await api('/v1/entries?' + query().toString());
    const body = el('entries').tBodies[0];
    body.replaceChildren();
    for (const e of list.entries) {
      body.append(row([keyCell(e), e.area, bytes(e.artifact_size), bytes(e.size), count(e.hits), time(e.last_access_ms)], [2, 3, 4]));
    }
    if (list.entries.length === 0) {
      const empty = row(['no entries match', '', '', '', '', '']);
      empty.className = 'empty';
      body.append(empty);
    }
    const first = list.entries.length ? offset + 1 : 0;
    el('summary').textContent = `${count(first)}–${count(offset + list.entries.length)} of ${count(list.total)} entries`;
    el('prev').disabled = offset === 0;
    el('next').disabled = offset + list.entries.length >= list.total;
  }

  document.addEventListener('DOMContentLoaded', () => {
    const reload = () => load().catch((error) => {
      el('error').textContent = String(error.message || error);
      el('error').hidden = false;
    });
    el('search').addEventListener('submit', (event) => {
      event.preventDefault();
      offset = 0;
      el('error').hidden = true;
      reload();
    });
    el('prev').addEventListener('click', () => {
      offset = Math.max(0, offset - PAGE);
      reload();
    });
    el('next').addEventListener('click', () => {
      offset += PAGE;
      reload();
    });
    el('detail-close').addEventListener('click', () => {
      el('detail').hidden = true;
    });
    kcache.start(load);
  });
})();
