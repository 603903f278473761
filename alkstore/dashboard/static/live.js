// alkstore dashboard: live numbers and small conveniences. No build step,
// no dependencies. The page names its live endpoint in <body data-live-url>;
// each answer carries fragments of HTML, rendered by the server, for the
// elements marked data-live="NAME". The server holds each request until the
// store's wakes say something changed (or its refresh interval passes).
(function () {
  "use strict";

  var url = document.body.getAttribute("data-live-url");
  var badge = document.getElementById("live-state");
  var failures = 0;
  var running = false;

  function show(text, state) {
    if (!badge) return;
    badge.textContent = "\u25CF " + text;
    badge.setAttribute("data-state", state);
  }

  // A fragment's ticked boxes stay ticked across its refresh (a selection
  // being made is not undone by the numbers moving), where their row remains.
  var TICKED = 'input[type="checkbox"][name="id"]';
  // So do the disclosures a reader opened or closed (a stack trace being
  // read), each known by its data-keep name.
  var KEPT = "details[data-keep]";

  function apply(fragments) {
    Object.keys(fragments).forEach(function (name) {
      var nodes = document.querySelectorAll('[data-live="' + name + '"]');
      for (var i = 0; i < nodes.length; i++) {
        var kept = {};
        var before = nodes[i].querySelectorAll(TICKED + ":checked");
        for (var j = 0; j < before.length; j++) kept[before[j].value] = true;
        var opened = {};
        var shown = nodes[i].querySelectorAll(KEPT);
        for (var m = 0; m < shown.length; m++) {
          opened[shown[m].getAttribute("data-keep")] = shown[m].open;
        }
        nodes[i].innerHTML = fragments[name];
        var after = nodes[i].querySelectorAll(TICKED);
        for (var k = 0; k < after.length; k++) if (kept[after[k].value]) after[k].checked = true;
        var again = nodes[i].querySelectorAll(KEPT);
        for (var n = 0; n < again.length; n++) {
          var key = again[n].getAttribute("data-keep");
          if (Object.prototype.hasOwnProperty.call(opened, key)) again[n].open = opened[key];
        }
      }
    });
  }

  function poll(wait) {
    if (document.hidden) {
      running = false;
      show("paused", "paused");
      return;
    }
    running = true;
    fetch(url + (wait ? "&wait=1" : ""), {
      credentials: "same-origin",
      cache: "no-store",
      headers: { Accept: "application/json" },
    })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (data) {
        apply(data.fragments || {});
        failures = 0;
        show("live", "ok");
        window.setTimeout(function () { poll(true); }, 0);
      })
      .catch(function () {
        failures += 1;
        show("reconnecting", "down");
        window.setTimeout(function () { poll(false); }, Math.min(30000, 1000 * 2 * failures));
      });
  }

  if (url) {
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && !running) poll(false);
    });
    window.setTimeout(function () { poll(true); }, 0);
  } else if (badge) {
    badge.hidden = true;
  }

  // "Select all" boxes tick every box of their form.
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box.hasAttribute || !box.hasAttribute("data-select-all")) return;
    var boxes = box.form ? box.form.querySelectorAll('input[type="checkbox"][name="id"]') : [];
    for (var i = 0; i < boxes.length; i++) boxes[i].checked = box.checked;
  });
})();
