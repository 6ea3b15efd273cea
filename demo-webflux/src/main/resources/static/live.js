// The page's live panels: the demo's locks (the fleet view, every 500 ms) with "break this lock" on a paused
// holder's lock, and the scheduled job's ticks on two instances with "stall the running instance".
// Both arrive as Server-Sent Events; an engine without a working EventSource (HtmlUnit) polls the same data as JSON.
// With ?play=scenario|break|job in the address the page plays one story by itself, clicking its own buttons, then
// closes its streams and sets <body data-play="done">: that is how the page tests drive it in any browser engine.
(function () {
  'use strict';
  var POLL_MS = 500;
  var TICKS_KEPT = 40;
  var match = /[?&]play=([a-z]+)/.exec(window.location.search);
  var play = match ? match[1] : null;
  var listeners = {};
  var closers = [];

  var demo = window.FencedDemo = {
    streaming: false,  // whether this engine runs EventSource (and so requests side by side)
    on: function (name, fn) { (listeners[name] = listeners[name] || []).push(fn); },
    signal: function (name, detail) {
      (listeners[name] || []).slice().forEach(function (fn) { fn(detail); });
    }
  };

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function request(method, url, body) {
    return new Promise(function (resolve, reject) {
      var xhr = new XMLHttpRequest();
      xhr.open(method, url);
      xhr.setRequestHeader('Accept', 'application/json');
      if (body !== undefined) { xhr.setRequestHeader('Content-Type', 'application/json'); }
      xhr.onload = function () {
        var data = null;
        try { data = JSON.parse(xhr.responseText); } catch (e) { data = null; }
        if (xhr.status === 200) { resolve(data); } else { reject({ status: xhr.status, body: data }); }
      };
      xhr.onerror = function () { reject({ status: 0, body: null }); };
      xhr.send(body === undefined ? null : JSON.stringify(body));
    });
  }

  // Server-Sent Events from sseUrl (events named eventName) where the engine has a working EventSource; else
  // poll() every POLL_MS. Either way each piece of data goes to onData.
  function live(sseUrl, eventName, poll, onData) {
    var source = null;
    try {
      source = typeof EventSource === 'function' ? new EventSource(sseUrl) : null;
    } catch (e) {
      source = null;
    }
    if (source && typeof source.readyState === 'number') {
      demo.streaming = true;
      source.addEventListener(eventName, function (message) { onData(JSON.parse(message.data)); });
      closers.push(function () { source.close(); });
      return;
    }
    var stopped = false;
    var timer = null;
    function next() {
      if (stopped) { return; }
      poll().then(onData, function () { /* the next poll tries again */ }).then(function () {
        if (!stopped) { timer = setTimeout(next, POLL_MS); }
      });
    }
    closers.push(function () { stopped = true; if (timer !== null) { clearTimeout(timer); } });
    next();
  }

  // ---- The locks panel ----
  var locksPanel = document.getElementById('locks-panel');
  var locksBody = locksPanel.querySelector('tbody');
  var longest = {};   // the longest remaining time seen per grant (name and token): the bar's full width
  var breaking = {};  // lock names whose break was asked for

  function renderLocks(snapshot) {
    locksBody.textContent = '';
    snapshot.locks.forEach(function (lock) {
      var grant = lock.name + '#' + lock.token;
      longest[grant] = Math.max(longest[grant] || 0, lock.remainingMs, 1);
      var tr = el('tr', lock.stalled ? 'stalled' : '');
      tr.setAttribute('data-lock', lock.name);
      tr.appendChild(el('td', 'name', lock.name));
      tr.appendChild(el('td', 'holder', (lock.holderLabel || '(no label)') + (lock.stalled ? ' — paused' : '')));
      tr.appendChild(el('td', 'num token', String(lock.token)));
      var remaining = el('td', 'remaining');
      var bar = el('div', 'bar');
      var fill = el('div', 'fill');
      fill.style.width = Math.round(100 * lock.remainingMs / longest[grant]) + '%';
      bar.appendChild(fill);
      remaining.appendChild(bar);
      remaining.appendChild(el('span', 'ms', lock.remainingMs + ' ms'));
      tr.appendChild(remaining);
      tr.appendChild(el('td', 'num waiters', String(lock.waiters)));
      var action = el('td', 'action');
      if (lock.stalled) {
        var button = el('button', 'break', breaking[lock.name] ? 'Breaking…' : 'Break this lock');
        button.type = 'button';
        button.disabled = !!breaking[lock.name];
        button.addEventListener('click', function () { breakLock(lock); });
        action.appendChild(button);
      }
      tr.appendChild(action);
      locksBody.appendChild(tr);
    });
    document.getElementById('locks-empty').style.display = snapshot.locks.length ? 'none' : '';
    locksPanel.setAttribute('data-state', snapshot.error ? 'failed' : 'live');
    if (snapshot.error) { document.getElementById('locks-empty').textContent = 'Cannot read the locks: ' + snapshot.error; }
    demo.signal('locks', snapshot);
  }

  function breakLock(lock) {
    if (breaking[lock.name]) { return; }
    breaking[lock.name] = true;
    var result = document.getElementById('break-result');
    result.textContent = 'Breaking ' + lock.name + '…';
    request('POST', 'locks/force-release', {
      name: lock.name,
      reason: 'demo page: ' + (lock.holderLabel || 'its holder') + ' is paused and holds the lock'
    }).then(function (released) {
      result.setAttribute('data-outcome', released.outcome);
      result.textContent = released.outcome === 'RELEASED'
        ? 'Broke ' + released.name + ' (token ' + released.token + ', held by ' + released.holderLabel + '): the next '
          + 'grant\'s token is above ' + released.token + ', so PostgreSQL will refuse the paused holder\'s writes.'
        : released.name + ' was not held any more: nothing to break.';
      demo.signal('broken', released);
    }, function (error) {
      breaking[lock.name] = false;
      result.setAttribute('data-outcome', 'failed');
      result.textContent = 'Could not break ' + lock.name + ': ' + (error.body && error.body.detail || error.status);
    });
  }

  // ---- The scheduled job panel ----
  var jobPanel = document.getElementById('job-panel');
  var ticksBody = jobPanel.querySelector('tbody');
  var lastSeq = 0;
  var KIND_TEXT = {
    'started': 'got the lock', 'ran': 'RAN', 'skipped': 'SKIPPED', 'cut-off': 'CUT_OFF', 'lost': 'LOST',
    'failed': 'FAILED', 'unavailable': 'UNAVAILABLE', 'paused': 'paused', 'resumed': 'resumed',
    'not-fired': 'fires nothing', 'write-accepted': 'write accepted', 'write-refused': 'write REFUSED',
    'write-failed': 'write failed'
  };

  function addTick(e) {
    if (e.seq <= lastSeq) { return; }  // a reconnected stream sends the recent events again
    lastSeq = e.seq;
    var tr = el('tr', e.outcome);
    tr.setAttribute('data-kind', e.kind);
    tr.setAttribute('data-instance', e.instance);
    tr.setAttribute('data-seq', String(e.seq));
    tr.appendChild(el('td', 'num', String(e.tick)));
    tr.appendChild(el('td', '', e.instance));
    tr.appendChild(el('td', 'what', KIND_TEXT[e.kind] || e.kind));
    tr.appendChild(el('td', 'num token', e.token === null ? '' : String(e.token)));
    tr.appendChild(el('td', '', e.detail));
    ticksBody.insertBefore(tr, ticksBody.firstChild);
    while (ticksBody.children.length > TICKS_KEPT) { ticksBody.removeChild(ticksBody.lastChild); }
    jobPanel.setAttribute('data-state', 'live');
    demo.signal('tick', e);
  }

  // A browser that streams waits on the request until the paused instance's late write was answered (the answer
  // carries the events from the pause on); an engine that runs one request at a time (HtmlUnit) only arms the pause.
  // Either way the answer says after which event the pause was armed.
  function stall() {
    var status = document.getElementById('stall-status');
    status.textContent = 'The instance that runs the next tick pauses right after taking the lock…';
    request('POST', demo.streaming ? 'jobs/stall?wait=true' : 'jobs/stall').then(function (answer) {
      demo.signal('stall-armed', answer.after);
      answer.events.forEach(addTick);
      var refused = answer.events.some(function (e) { return e.kind === 'write-refused'; });
      if (refused) { status.textContent = 'The paused instance\'s late write was refused by PostgreSQL.'; }
    }, function (error) {
      status.textContent = error.status === 409 ? 'An instance is paused already; wait until it resumes.'
        : 'Could not stall: ' + error.status;
      demo.signal('stall-refused', error);
    });
  }

  document.getElementById('stall').addEventListener('click', stall);

  // ---- Playing one story by itself (?play=...), for the page tests ----
  function finish(state) {
    closers.forEach(function (close) { close(); });
    closers = [];
    document.body.setAttribute('data-play', state);
  }

  if (play) {
    document.body.setAttribute('data-play', 'running');
    demo.on('scenario-failed', function () { finish('failed'); });
    if (play === 'scenario') {
      demo.on('scenario-done', function () { finish('done'); });
    } else if (play === 'break') {
      demo.on('scenario-done', function () { document.getElementById('run-stuck').click(); });
      demo.on('locks', function () {
        var button = locksBody.querySelector('tr.stalled button.break');
        if (button && !button.disabled) { button.click(); }
      });
      demo.on('stuck-done', function () { finish('done'); });
      demo.on('stuck-failed', function () { finish('failed'); });
    } else if (play === 'job') {
      // Clicks once a tick ran, then ends at the refusal of a write numbered after the pause was armed (the
      // recent events the page receives first may hold an earlier story's refusal).
      var clicked = false;
      var armedAfter = null;
      var refusedSeqs = [];
      var finishIfRefused = function () {
        if (armedAfter !== null && refusedSeqs.some(function (seq) { return seq > armedAfter; })) { finish('done'); }
      };
      demo.on('tick', function (e) {
        if (e.kind === 'write-refused') { refusedSeqs.push(e.seq); finishIfRefused(); }
        if (!clicked && e.kind === 'ran') {
          clicked = true;
          document.getElementById('stall').click();
        }
      });
      demo.on('stall-armed', function (after) { armedAfter = after; finishIfRefused(); });
      demo.on('stall-refused', function () { clicked = false; });  // try again at the next tick
    }
  }

  live('locks/stream', 'locks', function () { return request('GET', 'locks'); }, renderLocks);
  live('jobs/events', 'tick', function () { return request('GET', 'jobs/events?after=' + lastSeq); }, function (data) {
    (Array.isArray(data) ? data : [data]).forEach(addTick);
  });
}());
