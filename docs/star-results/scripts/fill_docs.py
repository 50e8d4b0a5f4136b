"""Fill the TABLE_* placeholders of docs/star-results.md from the runs' metrics (run from the worktree)."""
import io, json, math, re, shutil, subprocess, sys
from contextlib import redirect_stdout
from pathlib import Path

def wilson(k, n, z=1.96):
    p = k / n; d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d; h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return c - h, c + h

out = Path("docs/star-results"); out.mkdir(parents=True, exist_ok=True)
runs = {"STaR": "star", "STaR w/o rationalization": "norat", "direct fine-tuning": "direct"}
data = {k: json.load(open(f"star_runs/{v}/metrics.json"))["iterations"] for k, v in runs.items()}
n = max(len(v) for v in data.values())
def cell(m):
    if m is None: return "–"
    g = m["test_accuracy_by_group"]
    return f"{m['test_correct']}/{m['test_n']} = {m['test_accuracy']:.3f} (" + " / ".join(f"{g[k]:.3f}" for k in sorted(g)) + ")"
t = ["| iteration | " + " | ".join(runs) + " |", "|---|" + "---|" * len(runs)]
for i in range(n):
    t.append(f"| {i} | " + " | ".join(cell(v[i] if i < len(v) else None) for v in data.values()) + " |")
test_table = "\n".join(t)

f = []
for k in ("STaR", "STaR w/o rationalization"):
    f += [f"**{k}**", "", "| iter | train correct (no hint) | rationalized correct / tried | kept (of which rationalized) | per digit: correct + rationalized / n | steps | train loss |",
          "|---|---|---|---|---|---|---|"]
    for m in data[k][1:]:
        tg = m.get("train_by_group", {})
        pd = ", ".join(f"{g.split('-')[0]}d {v['correct']}+{v['rationalized_correct']}/{v['n']}" for g, v in tg.items())
        rat = f"{m['rationalization_correct']}/{m['rationalization_attempted']}" if k == "STaR" else "–"
        f.append(f"| {m['iteration']} | {m['train_correct_before_rationalization']}/{m['train_n']} | {rat} | {m['kept']} ({m['kept_rationalized']}) | {pd} | {m['steps']} | {m['train_loss'] if m['train_loss'] is not None else '– (nothing kept: M_n = base model)'} |")
    f.append("")
funnel = "\n".join(f)

buf = io.StringIO()
with redirect_stdout(buf):
    exec(open("star_runs/analyse.py").read(), {"__name__": "__main__"})
analysis = "```\n" + "\n".join(l for l in buf.getvalue().splitlines() if l.startswith("star ")) + "\n```"

u = ["| run | iteration | test acc. (1 / 2 digits) | train: correct + rationalized / n | kept | label accuracy |", "|---|---|---|---|---|---|"]
for name in ("gold12", "majority12"):
    for m in json.load(open(f"star_runs/{name}/metrics.json"))["iterations"]:
        g = m["test_accuracy_by_group"]
        acc = f"{m['test_correct']}/{m['test_n']} = {m['test_accuracy']:.3f} ({' / '.join(f'{g[x]:.3f}' for x in sorted(g))})"
        tr = f"{m['train_correct_before_rationalization']}+{m['rationalization_correct']}/{m['train_n']}" if m["iteration"] else ""
        pl = m.get("pseudo_labels")
        la = f"{pl['label_accuracy']:.3f} ({pl['labelled']}/{pl['n']} labelled)" if pl else ("gold" if m["iteration"] else "")
        u.append(f"| {name} | {m['iteration']} | {acc} | {tr} | {m.get('kept', '')} | {la} |")
unl = "\n".join(u)

doc = Path("docs/star-results.md").read_text()
for key, val in (("TABLE_TEST", test_table), ("TABLE_FUNNEL", funnel), ("TABLE_ANALYSIS", analysis), ("TABLE_UNLABELLED", unl)):
    doc = doc.replace(key, val)
Path("docs/star-results.md").write_text(doc)
for r in list(runs.values()) + ["gold12", "majority12"]:
    shutil.copy(f"star_runs/{r}/metrics.json", out / f"{r}_metrics.json")
    for p in Path(f"star_runs/{r}/plots").glob("*.png"):
        shutil.copy(p, out / f"{r}_{p.name}")
print(test_table); print(funnel); print(analysis); print(unl)
for k, v in data.items():
    for m in v:
        lo, hi = wilson(m["test_correct"], m["test_n"])
print("wilson 3/24", wilson(3, 24))
