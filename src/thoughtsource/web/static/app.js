// ThoughtSource annotator: keyboard shortcuts, autosave and similarity highlighting of the sample page.
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

  // ---------------------------------------------------------------- autosave
  function save(cotEl, key, value) {
    const cotId = cotEl.dataset.cotId;
    const body = JSON.stringify({
      dataset: page.ref.dataset, split: page.ref.split, sample_id: page.ref.sample_id,
      cot_id: cotId, key: key, value: value,
    });
    const qkey = cotId + "\u0000" + key;
    pending += 1;
    setStatus("saving…", "busy");
    const prev = queues.get(qkey) || Promise.resolve();
    const next = prev.then(() => fetch("/api/annotation", {
      method: "PUT",
      credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": page.csrf, "Accept": "application/json"},
      body: body,
    })).then(async (r) => {
      if (!r.ok) {
        let detail = r.statusText;
        try { detail = (await r.json()).detail || detail; } catch (e) { /* not JSON */ }
        throw new Error(r.status + " " + detail);
      }
      const state = page.state[cotId] || (page.state[cotId] = {});
      if (value === null || value === "") delete state[key]; else state[key] = value;
      pending -= 1;
      if (pending === 0) setStatus("saved", "ok");
    }).catch((err) => {
      pending -= 1;
      setStatus("not saved: " + err.message, "error");
    });
    queues.set(qkey, next);
    return next;
  }

  function setPressed(btn, on) {
    btn.classList.toggle("on", on);
    btn.setAttribute("aria-pressed", on ? "true" : "false");
  }

  function toggle(cotEl, key) {
    const btn = cotEl.querySelector('[data-key="' + CSS.escape(key) + '"]');
    if (!btn) return;
    const on = btn.getAttribute("aria-pressed") !== "true";
    if (key === "preferred" && on) {
      cots.forEach((c) => {
        if (c !== cotEl) {
          setPressed(c.querySelector(".star"), false);
          delete (page.state[c.dataset.cotId] || {}).preferred;
        }
      });
    }
    setPressed(btn, on);
    save(cotEl, key, on);
  }

  cots.forEach((cotEl) => {
    cotEl.querySelectorAll("button[data-key]").forEach((btn) => {
      btn.addEventListener("click", (ev) => { ev.stopPropagation(); toggle(cotEl, btn.dataset.key); });
    });
    const ta = cotEl.querySelector("textarea[data-key]");
    let timer = null;
    let last = ta.value;
    const flush = () => {
      clearTimeout(timer);
      if (ta.value !== last) { last = ta.value; save(cotEl, "comment", ta.value === "" ? null : ta.value); }
    };
    ta.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(flush, 600); });
    ta.addEventListener("blur", flush);
    cotEl.addEventListener("click", (ev) => {
      if (!ev.target.closest("button, textarea, summary, a, input")) cotEl.focus();
    });
  });

  // ---------------------------------------------------------------- keyboard
  function focusedCot() {
    const el = document.activeElement && document.activeElement.closest(".cot[data-cot-id]");
    return el || null;
  }

  function go(href) { if (href) window.location.assign(href); }

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
    }
  });

  // ---------------------------------------------------------------- similarity highlighting
  const slider = document.getElementById("sim-threshold");
  const out = document.getElementById("sim-value");
  const count = document.getElementById("sim-count");
  const spans = cots.map((c) => Array.from(c.querySelectorAll(".sent")));

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
    spans.forEach((ss, ci) => ss.forEach((span) => {
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
    const ci = cots.indexOf(span.closest(".cot"));
    const p = partners.get(ci + ":" + span.dataset.s) || [];
    span.classList.toggle("focus", on && p.length > 0);
    p.forEach(([c, s]) => {
      const other = spans[c] && spans[c][s];
      if (other) other.classList.toggle("partner", on);
    });
  }

  spans.forEach((ss) => ss.forEach((span) => {
    span.addEventListener("mouseenter", () => showPartners(span, true));
    span.addEventListener("mouseleave", () => showPartners(span, false));
  }));
  slider.addEventListener("input", refresh);
  document.querySelectorAll('input[name="sim-method"]').forEach((r) => r.addEventListener("change", refresh));
  refresh();
  if (cots.length) cots[0].focus({preventScroll: true});
})();
