// Draws the timeline of POST /scenario/replay as four lanes. No build step, no libraries.
(function () {
  'use strict';
  var LANES = [
    ['lock-service', 'Lock service'],
    ['worker-a', 'Worker A'],
    ['worker-b', 'Worker B'],
    ['database', 'Database']
  ];
  var LABEL_WIDTH = 120;
  var EVENT_WIDTH = 150;

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function draw(report) {
    var timeline = document.getElementById('timeline');
    timeline.textContent = '';
    var width = Math.max(timeline.clientWidth, 900);
    var span = Math.max(1, report.events[report.events.length - 1].offsetMs);
    var usable = width - LABEL_WIDTH - EVENT_WIDTH - 10;
    LANES.forEach(function (lane) {
      var row = el('div', 'lane');
      row.dataset.lane = lane[0];
      row.appendChild(el('div', 'lane-name', lane[1]));
      // Events close in time are stacked so that their labels stay readable.
      var rowsEnd = [];
      report.events.filter(function (e) { return e.lane === lane[0]; }).forEach(function (e) {
        var x = LABEL_WIDTH + 5 + Math.round(usable * e.offsetMs / span);
        var level = 0;
        while (rowsEnd[level] !== undefined && rowsEnd[level] > x) { level++; }
        rowsEnd[level] = x + EVENT_WIDTH + 4;
        var box = el('div', 'event ' + e.outcome);
        box.dataset.kind = e.kind;
        box.style.left = x + 'px';
        box.style.top = (4 + level * 30) + 'px';
        box.title = e.detail;
        box.appendChild(el('span', 't', e.offsetMs + ' ms '));
        box.appendChild(document.createTextNode(e.kind + (e.token !== null ? ' #' + e.token : '')));
        row.appendChild(box);
      });
      row.style.height = Math.max(70, 8 + rowsEnd.length * 30) + 'px';
      timeline.appendChild(row);
    });
    var axis = el('div', 'axis');
    for (var i = 0; i <= 4; i++) {
      var tick = el('span', 'tick', Math.round(span * i / 4) + ' ms');
      tick.style.left = (LABEL_WIDTH + 5 + Math.round(usable * i / 4)) + 'px';
      axis.appendChild(tick);
    }
    timeline.appendChild(axis);

    var log = document.getElementById('log');
    log.textContent = '';
    report.events.forEach(function (e) {
      var tr = el('tr', e.outcome);
      tr.appendChild(el('td', 'num', e.offsetMs + ' ms'));
      tr.appendChild(el('td', '', e.lane));
      tr.appendChild(el('td', 'num', e.token === null ? '' : String(e.token)));
      tr.appendChild(el('td', '', e.detail));
      log.appendChild(tr);
    });

    var verdict = document.getElementById('verdict');
    var good = report.workerARejected && report.workerBDataKept;
    verdict.className = good ? 'ok' : 'bad';
    verdict.textContent = good
      ? 'Worker A (token ' + report.tokenA + ') was rejected by the database; worker B\'s write (token '
        + report.tokenB + ') was kept.'
      : 'Fencing failed: worker A\'s stale write was not rejected.';
    document.getElementById('how').textContent = report.howThePauseIsMade;
  }

  function run() {
    var button = document.getElementById('run');
    var status = document.getElementById('status');
    button.disabled = true;
    document.body.dataset.state = 'running';
    status.textContent = 'Running: worker A is about to pause…';
    fetch('scenario/replay', { method: 'POST', headers: { 'Accept': 'application/json' } })
      .then(function (response) {
        if (!response.ok) {
          return response.text().then(function (body) { throw new Error(response.status + ' ' + body); });
        }
        return response.json();
      })
      .then(function (report) {
        draw(report);
        status.textContent = 'Invoice ' + report.invoiceId + ', lock ' + report.lockName + '.';
        document.body.dataset.state = 'done';
      })
      .catch(function (error) {
        status.textContent = 'The scenario failed: ' + error.message;
        document.body.dataset.state = 'failed';
      })
      .finally(function () { button.disabled = false; });
  }

  document.getElementById('run').addEventListener('click', run);
  // ?autorun=1 presses the button once the page has loaded (used by the headless browser test).
  if (new URLSearchParams(window.location.search).get('autorun') === '1') {
    document.getElementById('run').click();
  }
}());
