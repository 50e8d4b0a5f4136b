// ThoughtSource annotator: keyboard shortcuts, autosave, step labels and similarity highlighting of the sample page.
// No dependencies.  All data comes from the JSON block #page-data; all text is set with textContent.
(function () {
  "use strict";
  const dataEl = document.getElementById("page-data");
  if (!dataEl) return;
  const page = JSON.parse(dataEl.textContent);
  const cots = Array.from(document.querySelectorAll(".cot[data-cot-id]"));
  const status = document.getElementById("save-status");
  const queues = new Map();
  let pending = 0;

  function setStatus(text, cls) {
    status.textContent = text;
    status.className = "save-status " + (cls || "");
  }

  function sessionEnded() {
    // the save did not happen: say so and offer the login form (in a new tab, so this page keeps its state)
    status.textContent = "not saved: your session has ended. ";
    status.className = "save-status error";
    const a = document.createElement("a");
    a.href = "/login?next=" + encodeURIComponent(location.pathname + location.search);
    a.target = "_blank";
    a.rel = "noopener";
    a.textContent = "Log in again";
    status.appendChild(a);
  }

  // ---------------------------------------------------------------- autosave
  // send(): one request per change, queued per (CoT, key) so the server sees them in order.
  // onError(): undo what the page shows, so a label never looks set when it was not saved.
  function send(cotEl, qkey, url, payload, onOk, onError, keepalive) {
    if (page.readonly) { setStatus("read only: viewers cannot change annotations", "error"); onError(); return Promise.resolve(); }
    pending += 1;
    setStatus("saving…", "busy");
    const body = JSON.stringify(Object.assign({
      dataset: page.ref.dataset, split: page.ref.split, sample_id: page.ref.sample_id, cot_id: cotEl.dataset.cotId,
    }, payload));
    const request = () => fetch(url, {
      method: "PUT",
      credentials: "same-origin",
      keepalive: !!keepalive,
      headers: {"Content-Type": "application/json", "X-CSRF-Token": page.csrf, "Accept": "application/json"},
      body: body,
    });
    const prev = queues.get(qkey) || Promise.resolve();
    // a page being closed cannot wait for the queue: send at once (keepalive outlives the page)
    const next = (keepalive ? request() : prev.then(request)).then(async (r) => {
      if (!r.ok) {
        let detail = r.statusText;
        try { detail = (await r.json()).detail || detail; } catch (e) { /* not JSON */ }
        const err = new Error(r.status + " " + detail);
        err.status = r.status;
        throw err;
      }
      const data = await r.json();
      pending -= 1;
      onOk(data);
      if (pending === 0) setStatus("saved", "ok");
    }).catch((err) => {
      pending -= 1;
      onError();
      if (err.status === 401) sessionEnded(); else setStatus("not saved: " + err.message, "error");
    });
    queues.set(qkey, next);
    return next;
  }

  function save(cotEl, key, value, onError, keepalive) {
    const cotId = cotEl.dataset.cotId;
    return send(cotEl, cotId + "\u0000" + key, "/api/annotation", {key: key, value: value}, () => {
      const state = page.state[cotId] || (page.state[cotId] = {});
      if (value === null || value === "") delete state[key]; else state[key] = value;
    }, onError || (() => {}), keepalive);
  }

  function setPressed(btn, on) {
    btn.classList.toggle("on", on);
    btn.setAttribute("aria-pressed", on ? "true" : "false");
  }

  function toggle(cotEl, key) {
    const btn = cotEl.querySelector('[data-key="' + CSS.escape(key) + '"]');
    if (!btn) return;
    const on = btn.getAttribute("aria-pressed") !== "true";
    const before = cots.map((c) => c.querySelector(".star").getAttribute("aria-pressed") === "true");
    if (key === "preferred" && on) {
      cots.forEach((c) => { if (c !== cotEl) setPressed(c.querySelector(".star"), false); });
    }
    setPressed(btn, on);
    save(cotEl, key, on, () => {
      setPressed(btn, !on);
      if (key === "preferred") cots.forEach((c, i) => setPressed(c.querySelector(".star"), before[i]));
    });
  }

  const flushers = [];
  cots.forEach((cotEl) => {
    cotEl.querySelectorAll("button[data-key]").forEach((btn) => {
      btn.addEventListener("click", (ev) => { ev.stopPropagation(); toggle(cotEl, btn.dataset.key); });
    });
    const ta = cotEl.querySelector("textarea[data-key]");
    let timer = null;
    let last = ta.value;
    const flush = (keepalive) => {
      clearTimeout(timer);
      if (ta.value !== last) {
        last = ta.value;
        save(cotEl, "comment", ta.value === "" ? null : ta.value, () => { last = null; }, keepalive === true);
      }
    };
    flushers.push(flush);
    ta.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(flush, 600); });
    ta.addEventListener("blur", flush);
    cotEl.addEventListener("click", (ev) => {
      if (!ev.target.closest("button, textarea, summary, a, input")) cotEl.focus();
    });
  });
  // a comment typed just before the tab closes or the page changes is still sent (keepalive request)
  const flushAll = () => flushers.forEach((f) => f(true));
  window.addEventListener("pagehide", flushAll);
  window.addEventListener("beforeunload", flushAll);
  document.addEventListener("visibilitychange", () => { if (document.visibilityState === "hidden") flushAll(); });

  // ---------------------------------------------------------------- step labels
  // Each displayed sentence is a step.  The focused CoT has a step cursor (↓/↑); + 0 - label it
  // (PRM800K's +1 / 0 / -1), e marks the first error (and labels it -1), Delete clears.
  const steps = new Map(cots.map((c) => [c, Array.from(c.querySelectorAll(".step"))]));
  const cursor = new Map();

  // a sentence that is only a think tag stays a step (the numbering) but is hidden: the cursor passes it by
  const shown = (s) => !s.classList.contains("tagstep");

  function showCursor(cotEl, i) {
    const ss = steps.get(cotEl);
    ss.forEach((s, k) => s.classList.toggle("cur", k === i));
    cursor.set(cotEl, i);
    if (ss[i]) { reveal(ss[i]); ss[i].scrollIntoView({block: "nearest"}); }
  }

  // the nearest shown step from i on in direction delta (±1), or -1
  function nextShown(ss, i, delta) {
    for (let k = i; k >= 0 && k < ss.length; k += delta) if (shown(ss[k])) return k;
    return -1;
  }

  function moveStep(cotEl, delta) {
    const ss = steps.get(cotEl);
    const cur = cursor.has(cotEl) ? cursor.get(cotEl) : -1;
    const k = nextShown(ss, cur + delta, delta);
    if (k >= 0) showCursor(cotEl, k); else if (cur < 0 && nextShown(ss, 0, 1) >= 0) showCursor(cotEl, nextShown(ss, 0, 1));
  }

  function showSteps(cotEl, value) {
    const ss = steps.get(cotEl);
    const labels = (value && value.labels) || [];
    ss.forEach((s, k) => {
      const v = labels[k];
      s.dataset.label = (v === null || v === undefined) ? "" : String(v);
      s.classList.toggle("first-error", !!value && value.first_error === k);
    });
  }

  function currentSteps(cotEl) {
    const ss = steps.get(cotEl);
    const labels = ss.map((s) => (s.dataset.label === "" ? null : Number(s.dataset.label)));
    const fe = ss.findIndex((s) => s.classList.contains("first-error"));
    return {labels: labels, first_error: fe < 0 ? null : fe};
  }

  function labelStep(cotEl, change) {
    const ss = steps.get(cotEl);
    if (nextShown(ss, 0, 1) < 0) return;
    if (!cursor.has(cotEl)) showCursor(cotEl, nextShown(ss, 0, 1));
    const i = cursor.get(cotEl);
    const before = currentSteps(cotEl);
    const after = {labels: before.labels.slice(), first_error: before.first_error};
    if ("label" in change) after.labels[i] = change.label;
    if (change.first_error === true) { after.first_error = i; after.labels[i] = -1; }
    if (change.first_error === false && after.first_error === i) after.first_error = null;
    showSteps(cotEl, after);
    const cotId = cotEl.dataset.cotId;
    send(cotEl, cotId + "\u0000step_labels", "/api/steps", Object.assign({step: i}, change), (data) => {
      (page.state[cotId] || (page.state[cotId] = {})).step_labels = data.annotation.value;
    }, () => showSteps(cotEl, before));
    if ("label" in change && change.label !== null && nextShown(ss, i + 1, 1) >= 0) showCursor(cotEl, nextShown(ss, i + 1, 1));
  }

  // ---------------------------------------------------------------- long traces
  // A part over about 2 KB is collapsed (.collapsed) with a "show all" button; thinking is folded (<details>).
  function setExpanded(part, on) {
    part.classList.toggle("collapsed", !on);
    const btn = part.querySelector(":scope > .show-all");
    if (btn) {
      btn.setAttribute("aria-expanded", on ? "true" : "false");
      btn.textContent = on ? "show less" : btn.dataset.more;
    }
  }

  // the step cursor (or a similar sentence) never sits where it cannot be seen: unfold its thinking, and show all of a
  // collapsed part when the step lies below the fold
  function reveal(el) {
    const details = el.closest("details");
    if (details && !details.open) details.open = true;
    const part = el.closest(".part.collapsed");
    if (part) {
      const box = part.querySelector(".cot-text").getBoundingClientRect();
      if (el.getBoundingClientRect().bottom > box.bottom - 4) setExpanded(part, true);
    }
  }

  document.querySelectorAll(".part .show-all").forEach((btn) => btn.addEventListener("click", (ev) => {
    ev.stopPropagation();
    const part = btn.closest(".part");
    setExpanded(part, part.classList.contains("collapsed"));
  }));

  steps.forEach((ss, cotEl) => ss.forEach((s, k) => s.addEventListener("click", () => { cotEl.focus(); showCursor(cotEl, k); })));

  // ---------------------------------------------------------------- keyboard
  function focusedCot() {
    const el = document.activeElement && document.activeElement.closest(".cot[data-cot-id]");
    return el || null;
  }

  function go(href) { if (href) { flushAll(); window.location.assign(href); } }

  document.addEventListener("keydown", (ev) => {
    const t = ev.target;
    const typing = t && (t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && t.type !== "range" && t.type !== "radio"));
    if (typing) {
      if (ev.key === "Escape") { const c = t.closest(".cot"); (c || document.body).focus(); }
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "Tab" && cots.length) {
      const cur = focusedCot();
      if (cur === null || document.activeElement === cur) {
        const i = cur ? cots.indexOf(cur) : -1;
        const j = ev.shiftKey ? i - 1 : i + 1;
        if (j >= 0 && j < cots.length) { ev.preventDefault(); cots[j].focus(); }
      }
      return;
    }
    if (t && (t.type === "range" || t.type === "radio") && ev.key.startsWith("Arrow")) return;
    if (ev.key === "j" || ev.key === "ArrowRight") { ev.preventDefault(); go(page.next); return; }
    if (ev.key === "k" || ev.key === "ArrowLeft") { ev.preventDefault(); go(page.prev); return; }
    const cot = focusedCot() || cots[0];
    if (!cot) return;
    if (/^[1-9]$/.test(ev.key)) {
      const label = page.labels[Number(ev.key) - 1];
      if (label !== undefined) { ev.preventDefault(); toggle(cot, label); }
    } else if (ev.key === "s") {
      ev.preventDefault(); toggle(cot, "preferred");
    } else if (ev.key === "r") {
      ev.preventDefault(); toggle(cot, "reviewed");
    } else if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      ev.preventDefault(); moveStep(cot, ev.key === "ArrowDown" ? 1 : -1);
    } else if (ev.key === "+" || ev.key === "=") {
      ev.preventDefault(); labelStep(cot, {label: 1});
    } else if (ev.key === "0") {
      ev.preventDefault(); labelStep(cot, {label: 0});
    } else if (ev.key === "-") {
      ev.preventDefault(); labelStep(cot, {label: -1});
    } else if (ev.key === "e") {
      ev.preventDefault();
      const i = cursor.has(cot) ? cursor.get(cot) : nextShown(steps.get(cot), 0, 1);
      labelStep(cot, {first_error: currentSteps(cot).first_error !== i});
    } else if (ev.key === "Delete" || ev.key === "Backspace") {
      ev.preventDefault(); labelStep(cot, {label: null});
    }
  });

  // ---------------------------------------------------------------- similarity highlighting
  const slider = document.getElementById("sim-threshold");
  const out = document.getElementById("sim-value");
  const count = document.getElementById("sim-count");
  // spans[i]: the sentences of the CoT with index i in the data (the page may show the CoTs shuffled)
  const spans = {};
  cots.forEach((c) => { spans[c.dataset.cot] = Array.from(c.querySelectorAll(".sent")); });

  function partnersAt(method, threshold) {
    const col = method === "tfidf" ? 4 : 5;
    const partners = new Map();
    const add = (a, b) => { if (!partners.has(a)) partners.set(a, []); partners.get(a).push(b); };
    for (const p of page.similarity.pairs) {
      if (p[col] >= threshold) {
        add(p[0] + ":" + p[1], [p[2], p[3], p[col]]);
        add(p[2] + ":" + p[3], [p[0], p[1], p[col]]);
      }
    }
    return partners;
  }

  let partners = new Map();
  function refresh() {
    const method = document.querySelector('input[name="sim-method"]:checked').value;
    const threshold = Number(slider.value);
    out.textContent = threshold.toFixed(2);
    partners = partnersAt(method, threshold);
    let n = 0;
    Object.keys(spans).forEach((ci) => spans[ci].forEach((span) => {
      const p = partners.get(ci + ":" + span.dataset.s);
      span.classList.toggle("sim", !!p);
      if (p) {
        n += 1;
        const best = Math.max.apply(null, p.map((x) => x[2]));
        span.title = "similar to " + p.length + " sentence(s) in other CoTs (max " + best.toFixed(2) + ")";
      } else {
        span.removeAttribute("title");
      }
    }));
    count.textContent = n + " sentence" + (n === 1 ? "" : "s") + " highlighted";
  }

  function showPartners(span, on) {
    const ci = span.closest(".cot").dataset.cot;
    const p = partners.get(ci + ":" + span.dataset.s) || [];
    span.classList.toggle("focus", on && p.length > 0);
    p.forEach(([c, s]) => {
      const other = spans[c] && spans[c][s];
      if (other) other.classList.toggle("partner", on);
    });
  }

  Object.keys(spans).forEach((ci) => spans[ci].forEach((span) => {
    span.addEventListener("mouseenter", () => showPartners(span, true));
    span.addEventListener("mouseleave", () => showPartners(span, false));
  }));
  slider.addEventListener("input", refresh);
  document.querySelectorAll('input[name="sim-method"]').forEach((r) => r.addEventListener("change", refresh));
  refresh();
  if (cots.length) cots[0].focus({preventScroll: true});
})();
