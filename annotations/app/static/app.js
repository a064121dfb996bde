// aptforge review: keyboard shortcuts and open/close-all for steps. No inline code anywhere (the CSP
// allows scripts from this file only); nothing here reads or writes trajectory text.
(function () {
  "use strict";

  function typing(el) {
    return !!el && (el.tagName === "TEXTAREA" || el.tagName === "INPUT" || el.tagName === "SELECT" || el.isContentEditable);
  }

  function byId(id) {
    return document.getElementById(id);
  }

  function setSteps(open) {
    document.querySelectorAll("details.step").forEach(function (d) { d.open = open; });
  }

  function toggleHelp() {
    var help = byId("help");
    if (help) { help.classList.toggle("hidden"); }
  }

  function filterQuery() {
    return window.location.search || "";
  }

  document.addEventListener("DOMContentLoaded", function () {
    var toggle = byId("help-toggle");
    if (toggle) { toggle.addEventListener("click", toggleHelp); }
    document.querySelectorAll("[data-steps]").forEach(function (b) {
      b.addEventListener("click", function () { setSteps(b.getAttribute("data-steps") === "open"); });
    });
  });

  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (typing(t)) {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && t.form) {
        e.preventDefault();
        t.form.requestSubmit();
      } else if (e.key === "Escape") {
        t.blur();
      }
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) { return; }
    var el;
    switch (e.key) {
      case "a":
        el = byId("accept-button");
        if (el) { e.preventDefault(); el.click(); }
        break;
      case "r":
        el = byId("reject-note");
        if (el) { e.preventDefault(); el.focus(); }
        break;
      case "e":
        el = byId("edit");
        if (el) {
          e.preventDefault();
          el.open = true;
          var first = el.querySelector("textarea");
          if (first) { first.focus(); }
        }
        break;
      case "n":
        e.preventDefault();
        window.location.assign("/next" + filterQuery());
        break;
      case "l":
        e.preventDefault();
        window.location.assign("/" + filterQuery());
        break;
      case "o":
        setSteps(true);
        break;
      case "c":
        setSteps(false);
        break;
      case "?":
        toggleHelp();
        break;
      default:
        break;
    }
  });

  // Tells automation (and curious reviewers) that the shortcuts of this page are live.
  document.documentElement.setAttribute("data-shortcuts", "on");
})();
