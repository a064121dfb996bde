// aptforge review: keyboard shortcuts, open/close-all for steps, note counters. No inline code anywhere
// (the CSP allows scripts from this file only); nothing here reads or writes trajectory text.
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

  function follow(id) {
    var el = byId(id);
    if (el) { window.location.assign(el.getAttribute("href")); }
  }

  function pickGold(letter) {
    var radio = document.querySelector("#edit-form input[name=gold_index][data-letter='" + letter + "']");
    if (radio) { radio.checked = true; radio.focus(); return true; }
    return false;
  }

  function counters() {
    document.querySelectorAll(".counter[data-for]").forEach(function (c) {
      var box = byId(c.getAttribute("data-for"));
      var limit = parseInt(c.getAttribute("data-limit"), 10);
      if (!box) { return; }
      var update = function () {
        var n = box.value.length;
        c.textContent = n ? n + " / " + limit + (n > limit ? ": too long, shorten it before sending" : "") : "";
        c.classList.toggle("over", n > limit);
      };
      box.addEventListener("input", update);
      update();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var toggle = byId("help-toggle");
    if (toggle) { toggle.addEventListener("click", toggleHelp); }
    document.querySelectorAll("[data-steps]").forEach(function (b) {
      b.addEventListener("click", function () { setSteps(b.getAttribute("data-steps") === "open"); });
    });
    counters();
  });

  document.addEventListener("keydown", function (e) {
    var t = e.target;
    var edit = byId("edit");
    if (e.altKey && !e.ctrlKey && !e.metaKey && edit && edit.open && /^[a-z]$/i.test(e.key)) {
      if (pickGold(e.key.toUpperCase())) { e.preventDefault(); }
      return;
    }
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
    if (/^[1-9]$/.test(e.key)) {
      el = document.querySelector("#reasons input[data-key='" + e.key + "']");
      if (el) { e.preventDefault(); el.checked = !el.checked; }
      return;
    }
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
        if (edit) {
          e.preventDefault();
          edit.open = true;
          var first = edit.querySelector("textarea");
          if (first) { first.focus(); }
        }
        break;
      case "n":
        e.preventDefault();
        window.location.assign("/next" + window.location.search);
        break;
      case "s":
        e.preventDefault();
        follow("skip-link");
        break;
      case "p":
        e.preventDefault();
        follow("previous-link");
        break;
      case "u":
        el = byId("undo-button");
        if (el) { e.preventDefault(); el.click(); }
        break;
      case "l":
        e.preventDefault();
        window.location.assign("/" + window.location.search);
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
