// The operator's live status, updated in place: every data-refresh seconds the element
// #live[data-live] is replaced by the server's fragment at that address. Without JavaScript
// the page's <noscript> meta refresh reloads it instead. A failed fetch (an expired session,
// the portal restarting) leaves the last state shown and tries again at the next turn.
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live || !live.dataset.live) return;
  const seconds = Number(live.dataset.refresh) || 15;
  async function update() {
    try {
      const reply = await fetch(live.dataset.live, { credentials: "same-origin", redirect: "error" });
      if (reply.ok) live.innerHTML = await reply.text();
    } catch (e) {
      // Offline or logged out: keep what is shown.
    }
  }
  setInterval(update, seconds * 1000);
})();
