// Runs the scenario without and with fencing as soon as the page loads, and draws each run as four lanes.
// No build step, no libraries; plain XMLHttpRequest so that any browser engine runs it.
(function () {
  'use strict';
  var LANES = [
    ['lock-service', 'Lock service'],
    ['worker-a', 'Worker A'],
    ['worker-b', 'Worker B'],
    ['database', 'Database']
  ];
  var ARMS = [
    ['unfenced', 'scenario/replay-without-fencing'],
    ['fenced', 'scenario/replay']
  ];
  var LABEL_WIDTH = 86;
  var EVENT_WIDTH = 124;
  var STEP = 34;

  // A band behind worker A's lane from its pause to its resumption: the time it believed it held the lock.
  function drawPause(row, events, usable, span) {
    var from = events.filter(function (e) { return e.lane === 'worker-a' && e.kind === 'paused'; })[0];
    var to = events.filter(function (e) { return e.lane === 'worker-a' && e.kind === 'resumes'; })[0];
    if (!from || !to) { return; }
    var band = el('div', 'pause', 'paused for ' + (to.offsetMs - from.offsetMs) + ' ms');
    var left = LABEL_WIDTH + 5 + Math.round(usable * from.offsetMs / span) + EVENT_WIDTH;
    band.style.left = left + 'px';
    band.style.width = Math.max(0, LABEL_WIDTH + 5 + Math.round(usable * to.offsetMs / span) - left - 4) + 'px';
    row.insertBefore(band, row.firstChild.nextSibling);
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function post(url) {
    return new Promise(function (resolve, reject) {
      var request = new XMLHttpRequest();
      request.open('POST', url);
      request.setRequestHeader('Accept', 'application/json');
      request.onload = function () {
        if (request.status === 200 || request.status === 202) {
          resolve(JSON.parse(request.responseText));
        } else {
          reject(new Error(request.status + ' ' + request.responseText));
        }
      };
      request.onerror = function () { reject(new Error('no answer from ' + url)); };
      request.send();
    });
  }

  function tokenText(token) {
    return token === null ? 'no token' : 'token ' + token;
  }

  // What the run shows, in one sentence, and whether that is the outcome this arm is here to show.
  function verdict(report) {
    if (report.fencing) {
      return report.workerARejected && report.workerBDataKept
        ? { expected: true, css: 'ok', text: 'Worker A (token ' + report.tokenA + ') was rejected by the database; '
            + 'worker B\'s write (token ' + report.tokenB + ') was kept.' }
        : { expected: false, css: 'bad', text: 'Fencing failed: worker A\'s stale write was not rejected.' };
    }
    return !report.workerARejected && !report.workerBDataKept && report.finalInvoice.processedBy === 'worker-a'
      ? { expected: true, css: 'bad', text: 'Worker A\'s late write was accepted and overwrote worker B\'s: the row '
          + 'ends with A\'s stale ledger, and B\'s booking is lost.' }
      : { expected: false, css: 'ok', text: 'This time worker A\'s late write did not overwrite worker B\'s.' };
  }

  function drawTimeline(timeline, events) {
    timeline.textContent = '';
    var width = Math.max(timeline.clientWidth, 560);
    var span = Math.max(1, events[events.length - 1].offsetMs);
    var usable = width - LABEL_WIDTH - EVENT_WIDTH - 10;
    LANES.forEach(function (lane) {
      var row = el('div', 'lane');
      row.setAttribute('data-lane', lane[0]);
      row.appendChild(el('div', 'lane-name', lane[1]));
      // Events close in time are stacked so that their labels stay readable.
      var rowsEnd = [];
      events.filter(function (e) { return e.lane === lane[0]; }).forEach(function (e) {
        var x = LABEL_WIDTH + 5 + Math.round(usable * e.offsetMs / span);
        var level = 0;
        while (rowsEnd[level] !== undefined && rowsEnd[level] > x) { level++; }
        rowsEnd[level] = x + EVENT_WIDTH + 4;
        var box = el('div', 'event ' + e.outcome);
        box.setAttribute('data-kind', e.kind);
        box.style.left = x + 'px';
        box.style.top = (4 + level * STEP) + 'px';
        box.title = e.detail;
        box.appendChild(el('div', 'label', e.label));
        box.appendChild(el('div', 't', e.offsetMs + ' ms' + (e.token !== null ? ' · token ' + e.token : '')));
        row.appendChild(box);
      });
      if (lane[0] === 'worker-a') { drawPause(row, events, usable, span); }
      row.style.height = Math.max(64, 8 + rowsEnd.length * STEP) + 'px';
      timeline.appendChild(row);
    });
    var axis = el('div', 'axis');
    for (var i = 0; i <= 4; i++) {
      var tick = el('span', 'tick', Math.round(span * i / 4) + ' ms');
      tick.style.left = (LABEL_WIDTH + 5 + Math.round(usable * i / 4)) + 'px';
      axis.appendChild(tick);
    }
    timeline.appendChild(axis);
  }

  function draw(section, report) {
    drawTimeline(section.querySelector('.timeline'), report.events);
    var log = section.querySelector('tbody');
    log.textContent = '';
    report.events.forEach(function (e) {
      var tr = el('tr', e.outcome);
      tr.appendChild(el('td', 'num', e.offsetMs + ' ms'));
      tr.appendChild(el('td', '', e.lane));
      tr.appendChild(el('td', 'num', e.token === null ? '' : String(e.token)));
      tr.appendChild(el('td', '', e.detail));
      log.appendChild(tr);
    });
    var result = verdict(report);
    var line = section.querySelector('.verdict');
    line.className = 'verdict ' + result.css;
    line.setAttribute('data-expected', String(result.expected));
    line.textContent = result.text;
    var row = report.finalInvoice;
    section.querySelector('.row').textContent = 'The invoice row at the end: written by ' + row.processedBy
      + ', ledger ' + row.ledgerTotal + ', booked ' + row.timesProcessed + ' time(s), ' + tokenText(row.fencingToken)
      + (report.fencing
        ? '. Worker A had token ' + report.tokenA + ', worker B token ' + report.tokenB + '.'
        : '. A plain lock gives no token, so the database cannot tell A\'s late write from B\'s.');
    if (section.getAttribute('data-arm') === 'stuck') {
      section.querySelector('.how').textContent = report.howThePauseIsMade;
    } else {
      document.getElementById('how').textContent = report.howThePauseIsMade;
    }
  }

  function signal(name, detail) {
    if (window.FencedDemo) { window.FencedDemo.signal(name, detail); }
  }

  function get(url) {
    return new Promise(function (resolve, reject) {
      var request = new XMLHttpRequest();
      request.open('GET', url);
      request.setRequestHeader('Accept', 'application/json');
      request.onload = function () {
        if (request.status === 200 || request.status === 202) {
          resolve({ status: request.status, body: JSON.parse(request.responseText) });
        } else {
          reject(new Error(request.status + ' ' + request.responseText));
        }
      };
      request.onerror = function () { reject(new Error('no answer from ' + url)); };
      request.send();
    });
  }

  // The stuck run's report. A browser that streams (EventSource) runs requests side by side, so it waits on one
  // long request; an engine that runs one request at a time (HtmlUnit) polls, so that the locks panel still polls.
  function stuckReport(id) {
    var streaming = window.FencedDemo && window.FencedDemo.streaming;
    return get('scenario/stuck-runs/' + id + (streaming ? '?wait=true' : '')).then(function (answer) {
      if (answer.status === 200) { return answer.body; }
      return new Promise(function (resolve) { setTimeout(resolve, 500); }).then(function () { return stuckReport(id); });
    });
  }

  // The fenced timeline with a stuck worker A: it ends once A's late write was answered, after someone broke A's
  // lock in the locks panel (or after A's 30-second lease ran out).
  function runStuck() {
    var section = document.querySelector('.arm[data-arm="stuck"]');
    var button = document.getElementById('run-stuck');
    var status = section.querySelector('.status');
    button.disabled = true;
    section.setAttribute('data-state', 'running');
    status.textContent = 'Worker A holds the lock and is paused; worker B waits. Break A\'s lock in the locks panel above.';
    post('scenario/stuck-runs').then(function (started) { return stuckReport(started.id); }).then(function (report) {
      draw(section, report);
      var broken = report.events.some(function (e) { return e.kind === 'force-released'; });
      status.textContent = broken
        ? 'A\'s lock was broken by hand; B got token ' + report.tokenB + ', above A\'s ' + report.tokenA + '.'
        : 'Nobody broke A\'s lock: its lease ran out after 30 s, and B got it then.';
      section.setAttribute('data-state', 'done');
      signal('stuck-done', report);
    }, function (error) {
      status.textContent = 'The scenario failed: ' + error.message;
      section.setAttribute('data-state', 'failed');
      signal('stuck-failed', error);
    }).then(function () { button.disabled = false; });
  }

  function run() {
    var button = document.getElementById('run');
    var status = document.getElementById('status');
    button.disabled = true;
    document.body.setAttribute('data-state', 'running');
    status.textContent = 'Running both timelines against Redis and PostgreSQL (worker A pauses for about 2 s)…';
    Promise.all(ARMS.map(function (arm) { return post(arm[1]); }))
      .then(function (reports) {
        reports.forEach(function (report, i) {
          draw(document.querySelector('.arm[data-arm="' + ARMS[i][0] + '"]'), report);
        });
        status.textContent = 'Ran just now on invoices ' + reports[0].invoiceId + ' and ' + reports[1].invoiceId + '.';
        document.body.setAttribute('data-state', 'done');
        signal('scenario-done', reports);
      }, function (error) {
        status.textContent = 'The scenario failed: ' + error.message;
        document.body.setAttribute('data-state', 'failed');
        signal('scenario-failed', error);
      })
      .then(function () { button.disabled = false; });
  }

  document.getElementById('run').addEventListener('click', run);
  document.getElementById('run-stuck').addEventListener('click', runStuck);
  run();
}());
