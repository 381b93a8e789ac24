// Eddy status page: polls the admin API and updates the figures in place.
"use strict";
(function () {
  var POLL_MS = 1500, CHART_BARS = 30, HISTORY_ROWS = 10;
  var token = sessionStorage.getItem("eddy-token") || "";
  var prev = null; // last poll: {t: ms, in: {name: n}, out: {name: n}}
  var polls = 0;

  function $(id) { return document.getElementById(id); }

  // The same formats as the server's first render (status.go).
  function bytes(n) {
    if (n < 1024) return n + " B";
    var v = n / 1024, i = 0;
    while (v >= 1024 && i < 2) { v /= 1024; i++; }
    return v.toFixed(1) + " " + ["KiB", "MiB", "GiB"][i];
  }
  function ms(v) {
    if (Math.abs(v) < 1000) return Math.trunc(v) + " ms";
    if (Math.abs(v) < 120000) return (v / 1000).toFixed(1) + " s";
    return (v / 60000).toFixed(1) + " min";
  }
  function rate(v) { return (v < 100 ? v.toFixed(1) : v.toFixed(0)) + "/s"; }

  function get(path) {
    var opts = { cache: "no-store", headers: token ? { Authorization: "Bearer " + token } : {} };
    return fetch(path, opts).then(function (r) {
      if (r.status === 401) { $("auth").hidden = false; throw new Error("the admin token is missing or wrong"); }
      // 503 on readyz still carries the checks.
      if (!r.ok && !(path === "readyz" && r.status === 503)) throw new Error(path + ": HTTP " + r.status);
      return r.json();
    });
  }

  function cell(tr, text, field, header) {
    var c = document.createElement(header ? "th" : "td");
    if (header) c.scope = "row";
    if (field) c.dataset.field = field;
    c.textContent = text;
    tr.appendChild(c);
  }
  function fill(tbody, rows) { tbody.replaceChildren.apply(tbody, rows); }

  function renderHealth(rd) {
    var h = $("health");
    h.dataset.ready = String(rd.ready);
    var bad = rd.checks.filter(function (c) { return !c.ok; })
      .map(function (c) { return " " + c.name + ": " + c.detail + "."; });
    h.textContent = rd.ready ? "Ready" : "Not ready:" + bad.join("");
  }

  function renderPipelines(ps, now) {
    var rows = ps.map(function (p) {
      var tr = document.createElement("tr");
      tr.dataset.pipeline = p.name;
      var rin = "–", rout = "–";
      if (prev && p.name in prev.in && now > prev.t) {
        var dt = (now - prev.t) / 1000;
        rin = rate((p.readings_in - prev.in[p.name]) / dt);
        rout = rate((p.results_out - prev.out[p.name]) / dt);
      }
      var lag = !p.event_time ? "processing time" : p.watermark_lag_ms == null ? "no watermark yet" : ms(p.watermark_lag_ms);
      cell(tr, p.name, null, true);
      cell(tr, p.readings_in, "readings_in");
      cell(tr, rin, "readings_per_s");
      cell(tr, p.results_out, "results_out");
      cell(tr, rout, "results_per_s");
      cell(tr, lag, "watermark_lag");
      cell(tr, p.late, "late");
      cell(tr, p.dropped, "dropped");
      cell(tr, p.dead_lettered, "dead_lettered");
      cell(tr, p.filtered, "filtered");
      var st = p.state;
      cell(tr, st == null ? "none" : st.windows + " windows, " + bytes(st.file_bytes || st.memory_bytes), "state");
      cell(tr, p.parallelism, "parallelism");
      return tr;
    });
    fill($("pipelines").tBodies[0], rows);
    prev = { t: now, in: {}, out: {} };
    ps.forEach(function (p) { prev.in[p.name] = p.readings_in; prev.out[p.name] = p.results_out; });
  }

  function renderCheckpoints(c) {
    var stats = [
      ["Completed", "completed", c.completed],
      ["Failed", "failed", c.failed],
      ["Failed in a row", "consecutive_failures", c.consecutive_failures + " of " + c.tolerable_failures + " tolerated"],
      ["Last duration", "last_duration", ms(c.last_duration_ms)],
      ["Last size", "last_size", bytes(c.last_size_bytes)],
      ["Chain size", "last_full_size", bytes(c.last_full_size_bytes)]
    ].map(function (s) {
      var d = document.createElement("div"), dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = s[0]; dd.dataset.field = s[1]; dd.textContent = s[2];
      d.append(dt, dd);
      return d;
    });
    $("ckpt-stats").replaceChildren.apply($("ckpt-stats"), stats);
    drawChart(c.history.slice(-CHART_BARS));
    var rows = c.history.slice(-HISTORY_ROWS).reverse().map(function (h) {
      var tr = document.createElement("tr");
      cell(tr, h.id); cell(tr, h.kind); cell(tr, h.time.replace(/\.\d+Z$/, "Z")); cell(tr, ms(h.duration_ms));
      cell(tr, bytes(h.size_bytes)); cell(tr, bytes(h.full_bytes)); cell(tr, ms(h.alignment_ms));
      cell(tr, h.aborted ? "aborted: " + h.aborted : "completed");
      return tr;
    });
    fill($("checkpoints").tBodies[0], rows);
  }

  // The chart in its 300×80 view box: a bar per checkpoint for its size,
  // a line through their durations, each scaled to its largest; every
  // bar's <title> is its tooltip.
  function drawChart(hist) {
    var svg = $("ckpt-chart"), NS = "http://www.w3.org/2000/svg";
    svg.replaceChildren(svg.querySelector("title"));
    var most = function (f) { return hist.reduce(function (m, h) { return Math.max(m, f(h)); }, 1); };
    var maxSize = most(function (h) { return h.size_bytes; }), maxDur = most(function (h) { return h.duration_ms; });
    var w = 300 / CHART_BARS, pts = [];
    hist.forEach(function (h, i) {
      var r = document.createElementNS(NS, "rect");
      var bh = h.aborted ? 80 : Math.max(2, 76 * h.size_bytes / maxSize);
      r.setAttribute("x", (i * w + 1).toFixed(1));
      r.setAttribute("y", (80 - bh).toFixed(1));
      r.setAttribute("width", (w - 2).toFixed(1));
      r.setAttribute("height", bh.toFixed(1));
      r.setAttribute("class", h.aborted ? "bar aborted" : "bar");
      var t = document.createElementNS(NS, "title");
      t.textContent = "#" + h.id + " " + h.kind + ": " + (h.aborted ? "aborted: " + h.aborted : bytes(h.size_bytes) + " in " + ms(h.duration_ms));
      r.appendChild(t);
      svg.appendChild(r);
      if (!h.aborted) pts.push((i * w + w / 2).toFixed(1) + "," + (78 - 76 * h.duration_ms / maxDur).toFixed(1));
    });
    if (pts.length > 1) {
      var line = document.createElementNS(NS, "polyline");
      line.setAttribute("points", pts.join(" "));
      line.setAttribute("class", "dur");
      svg.appendChild(line);
    }
  }

  function renderAgent(a) {
    $("device").textContent = a.device_id;
    fill($("sources").tBodies[0], (a.sources || []).map(function (s) {
      var tr = document.createElement("tr");
      var conn = !s.tracked ? "not tracked" : s.connected ? "connected" :
        s.disconnected_ms != null ? "disconnected for " + ms(s.disconnected_ms) : "disconnected";
      cell(tr, s.name, null, true); cell(tr, s.kind); cell(tr, conn);
      return tr;
    }));
    var nr = function (v, f) { return v == null ? "not reported yet" : f(v); };
    var id = function (v) { return String(v); };
    section("ingest", ["Source", "Size", "Limit", "Offsets", "Lag"], (a.ingest || []).map(function (l) {
      return [l.source, bytes(l.size_bytes), bytes(l.max_disk_bytes), l.first_offset + "–" + l.last_offset, l.lag_records];
    }));
    section("wal", ["Sink", "Backlog", "Messages", "Oldest", "On disk", "Limit", "Uplink"], (a.wal || []).map(function (w) {
      return [w.sink, nr(w.backlog_bytes, bytes), nr(w.backlog_messages, id), nr(w.oldest_age_s, function (s) { return ms(s * 1000); }),
        nr(w.disk_bytes, bytes), bytes(w.max_disk_bytes), nr(w.connected, function (c) { return c ? "connected" : "disconnected"; })];
    }));
    var u = a.upload;
    $("upload").textContent = !u ? "Not configured." :
      "To " + u.endpoint + "/" + u.bucket + "/" + u.prefix + "; backlog " + nr(u.backlog_checkpoints, function (n) { return n + " checkpoints"; }) +
      " (" + nr(u.backlog_files, function (n) { return n + " files"; }) + "), recovery-point lag " + nr(u.recovery_point_lag_ms, ms) + ".";
    var dk = a.disk;
    $("disk-budget").textContent = !dk ? "Not configured." :
      "Using " + bytes(dk.components.reduce(function (n, c) { return n + c.bytes; }, 0)) + " of a budget of " +
      (dk.budget_bytes > 0 ? bytes(dk.budget_bytes) : "unknown (set agent { max_disk })") + "; " +
      bytes(dk.free_bytes) + " free on data_dir's file system.";
    section("disk", ["Component", "On disk"], (dk ? dk.components : []).map(function (c) {
      return [c.component, bytes(c.bytes)];
    }));
  }

  // section fills the element id with a table of rows (the first cell of
  // each is its header), or "Not configured." when there are none.
  function section(id, heads, rows) {
    var el = $(id);
    if (!rows.length) {
      var p = document.createElement("p");
      p.textContent = "Not configured.";
      el.replaceChildren(p);
      return;
    }
    var t = document.createElement("table"), hr = t.createTHead().insertRow(), tb = t.createTBody();
    heads.forEach(function (h) {
      var th = document.createElement("th");
      th.scope = "col"; th.textContent = h;
      hr.appendChild(th);
    });
    rows.forEach(function (r) {
      var tr = tb.insertRow();
      r.forEach(function (v, i) { cell(tr, v, null, i === 0); });
    });
    el.replaceChildren(t);
  }

  function poll() {
    Promise.all([get("api/pipelines"), get("api/checkpoints").catch(function () { return null; }), get("api/agent"), get("readyz")])
      .then(function (r) {
        var now = performance.now();
        renderPipelines(r[0] || [], now);
        if (r[1]) renderCheckpoints(r[1]);
        renderAgent(r[2]);
        renderHealth(r[3]);
        $("updated").textContent = new Date().toISOString().replace(/\.\d+Z$/, "Z");
        $("poll-error").textContent = "";
        document.body.dataset.polls = String(++polls);
      })
      .catch(function (e) { $("poll-error").textContent = "Update failed: " + e.message; })
      .finally(function () { setTimeout(poll, POLL_MS); });
  }

  $("auth").addEventListener("submit", function (e) {
    e.preventDefault();
    token = $("token").value;
    sessionStorage.setItem("eddy-token", token);
    $("auth").hidden = true;
  });
  $("savepoint").addEventListener("submit", function (e) {
    e.preventDefault();
    var out = $("savepoint-result");
    out.textContent = "Taking a savepoint…";
    fetch("api/savepoint", { method: "POST", headers: token ? { Authorization: "Bearer " + token } : {} })
      .then(function (r) { return r.json().then(function (b) { return [r.status, b]; }); })
      .then(function (x) { out.textContent = x[0] === 200 ? "Savepoint " + x[1].id + " taken." : "Savepoint failed: " + x[1].error; })
      .catch(function (err) { out.textContent = "Savepoint failed: " + err.message; });
  });
  poll();
})();
