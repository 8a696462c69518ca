// Polls /api/live and redraws two charts: each broker's In/Out TPS, each group's lag.
(function () {
  "use strict";
  var INTERVAL_MS = 3000;
  var KEPT = 200; // samples kept per series (10 minutes)
  var tps = {}; // series name -> {x: [], y: []}
  var lag = {};
  var samples = 0;

  function add(series, name, time, value) {
    var s = series[name] || (series[name] = { x: [], y: [] });
    s.x.push(time);
    s.y.push(value);
    if (s.x.length > KEPT) { s.x.shift(); s.y.shift(); }
  }

  function traces(series) {
    return Object.keys(series).sort().map(function (name) {
      // copies: Plotly.react redraws arrays it has not seen, not ones changed in place
      var s = series[name];
      return { name: name, x: s.x.slice(), y: s.y.slice(), mode: "lines+markers", type: "scatter" };
    });
  }

  function draw(element, series, title, unit) {
    Plotly.react(element, traces(series), {
      title: { text: title },
      datarevision: samples,
      xaxis: { type: "date" },
      yaxis: { title: { text: unit }, rangemode: "tozero" },
      margin: { t: 40, r: 10, b: 40, l: 60 },
    }, { displaylogo: false, responsive: true });
  }

  function show(sample) {
    var time = new Date(sample.time);
    sample.brokers.forEach(function (b) {
      add(tps, b.broker + " in", time, b.in_tps);
      add(tps, b.broker + " out", time, b.out_tps);
    });
    sample.groups.forEach(function (g) { add(lag, g.group, time, g.lag); });
    draw("chart-tps", tps, "In / Out TPS per broker", "messages/s");
    draw("chart-lag", lag, "Lag per consumer group", "messages");
    samples += 1;
    var counter = document.getElementById("live-samples");
    counter.textContent = String(samples);
    counter.dataset.samples = String(samples);
  }

  function poll() {
    var error = document.getElementById("live-error");
    fetch("/api/live", { headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.json().then(function (body) {
          if (!response.ok) { throw new Error(body.error || response.statusText); }
          return body;
        });
      })
      .then(function (sample) { error.hidden = true; show(sample); })
      .catch(function (failure) { error.textContent = String(failure.message || failure); error.hidden = false; })
      .finally(function () { setTimeout(poll, INTERVAL_MS); });
  }

  poll();
})();
