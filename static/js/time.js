// Shows every <time data-local> (written by the `moment` template tag in UTC) in the
// reader's own time zone, with how far it is from now ("in 3 h 10 min", "12 min ago")
// when it has data-relative; the relative part is refreshed every 30 s.
(function () {
  function pad(n) { return String(n).padStart(2, "0"); }
  function zoneName(date) {
    try {
      const part = new Intl.DateTimeFormat(undefined, {timeZoneName: "short"})
        .formatToParts(date).find(function (p) { return p.type === "timeZoneName"; });
      return part ? part.value : "";
    } catch (e) { return ""; }
  }
  function span(seconds) {
    let s = Math.round(Math.abs(seconds));
    if (s < 60) { return s + " s"; }
    let minutes = Math.floor(s / 60);
    if (minutes < 60) { return minutes + " min"; }
    let hours = Math.floor(minutes / 60); minutes = minutes % 60;
    if (hours < 24) { return minutes ? hours + " h " + minutes + " min" : hours + " h"; }
    const days = Math.floor(hours / 24); hours = hours % 24;
    return hours ? days + " d " + hours + " h" : days + " d";
  }
  // "now" within 45 s; within 5 s for a time written to the second (a cycle's), as
  // config/clock.py's relative_text (NOW_S, NOW_SECONDS_S)
  function relative(date, toTheSecond) {
    const delta = (date.getTime() - Date.now()) / 1000;
    if (Math.abs(delta) < (toTheSecond ? 5 : 45)) { return "now"; }
    return delta > 0 ? "in " + span(delta) : span(delta) + " ago";
  }
  function show(el) {
    const date = new Date(el.getAttribute("datetime"));
    if (isNaN(date.getTime())) { return; }
    let text = date.getFullYear() + "-" + pad(date.getMonth() + 1) + "-" + pad(date.getDate()) +
      " " + pad(date.getHours()) + ":" + pad(date.getMinutes());
    if (el.dataset.local === "seconds") { text += ":" + pad(date.getSeconds()); }
    const zone = zoneName(date);
    if (zone) { text += " " + zone; }
    if (el.dataset.relative) { text += " (" + relative(date, el.dataset.local === "seconds") + ")"; }
    el.textContent = text;
    el.title = date.toISOString().replace(".000Z", "Z").replace("T", " ") + " (UTC)";
  }
  function showAll(root) {
    (root.querySelectorAll ? root : document).querySelectorAll("time[data-local]").forEach(show);
  }
  document.addEventListener("DOMContentLoaded", function () { showAll(document); });
  document.addEventListener("htmx:load", function (e) { showAll(e.target); });
  setInterval(function () {
    document.querySelectorAll("time[data-local][data-relative]").forEach(show);
  }, 30000);
})();
