"""Turns perf/vs-kafka/run's raw results (results/vs-kafka.json) into perf/RESULTS.md and the
plots in perf/results/: medians over repetitions, samsa/Kafka ratios and the issue's targets."""

import json
import math
from pathlib import Path

from vslib import median

BROKERS = ["samsa", "kafka-default", "kafka-flush"]
LABEL = {"samsa": "samsa", "kafka-default": "Kafka default", "kafka-flush": "Kafka+flush"}
COLOR = {"samsa": "#1b9e77", "kafka-default": "#d95f02", "kafka-flush": "#7570b3"}


# Everything from this line on in RESULTS.md is kept when the report is rewritten.
KEEP_MARKER = "<!-- kept by vs-kafka/report.py: sections below are written by other tools -->"

def keys(path):
    """'a.b.p99.9' -> ['a', 'b', 'p99.9']: percentile names keep their dots."""
    out = []
    for k in path.split("."):
        if out and k.isdigit() and out[-1].startswith("p99"):
            out[-1] += "." + k
        else:
            out.append(k)
    return out


def get(d, path):
    for k in keys(path):
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def judged(runs):
    """The repetitions a target is judged on: the undisturbed ones (perf/README.md, "Quiet
    machine"); all of them when every one was disturbed (the table says so)."""
    calm = [r for r in runs if not r.get("disturbed")]
    return calm or runs


def med(results, broker, workload, path):
    """Median over a workload's undisturbed repetitions of one figure."""
    runs = results.get("brokers", {}).get(broker, {}).get(workload)
    if not runs:
        return None
    return median([get(r, path) for r in judged(runs)])


def spread(results, broker, workload, path):
    """(min, max) over the same repetitions as med(), or None."""
    runs = results.get("brokers", {}).get(broker, {}).get(workload) or []
    vals = [v for v in (get(r, path) for r in judged(runs)) if v is not None]
    return (min(vals), max(vals)) if vals else None


def quiet_table(results):
    """Per workload and broker: repetitions, how many were disturbed, the CPU others used and
    the load average at the end of each."""
    lines = ["| workload | broker | repetitions | disturbed | others' cores (max) | "
             "kernel threads' cores (max) | load1 at the end | waited for quiet (s, max) |",
             "|---|---|---|---|---|---|---|---|"]
    for w in ("w1", "w2", "w3", "w4", "w5"):
        for b in BROKERS:
            runs = results.get("brokers", {}).get(b, {}).get(w) or []
            if not runs:
                continue
            if "others_cores" not in runs[0]:
                return []  # a run from before the protocol
            oc = [r.get("others_cores") or 0 for r in runs]
            kc = [r.get("kernel_threads_cores") or 0 for r in runs]
            l1 = [r.get("load1") for r in runs if r.get("load1") is not None]
            qw = [r.get("quiet_wait_s") or 0 for r in runs]
            lines.append(f"| {w} | {b} | {len(runs)} | {sum(bool(r.get('disturbed')) for r in runs)}"
                         f" | {max(oc):.2f} | {max(kc):.2f} | "
                         f"{', '.join(f'{x:.1f}' for x in l1)} | {max(qw):.0f} |")
    return lines


def fmt(v, digits=3):
    if v is None:
        return "–"
    if isinstance(v, str):
        return v
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def ratio(a, b):
    return a / b if a is not None and b else None


def latency_ms(results, broker, side, p):
    v = med(results, broker, "w2", f"{side}.latency_us.{p}")
    return v / 1000 if v is not None else None


def ceiling_mb(results):
    c = results.get("ceiling") or {}
    vals = [median([get(r, "produce.mb_per_s") for r in runs]) for runs in c.values()]
    vals = [v for v in vals if v is not None]
    return max(vals) if vals else None


def targets(results):
    """Rows: (target, goal, measured, met) as strings plus a note list."""
    rows, notes = [], []
    S, D, F = "samsa", "kafka-default", "kafka-flush"
    w1 = {b: med(results, b, "w1", "produce.mb_per_s") for b in BROKERS}
    ceil = ceiling_mb(results)
    # A ceiling below what samsa-perf itself drove through a durable broker in the same run is
    # no ceiling: its runs were disturbed (the shared machine). Capping goals by it would call
    # targets met that are not; leave them uncapped and say so.
    disturbed = ceil is not None and any(v is not None and v > ceil for v in w1.values())
    if disturbed:
        notes.append(f"The load generator's ceiling measured in this run ({fmt(ceil)} MB/s) is "
                     "below a w1 figure of the same run, so its runs were disturbed: the w1 "
                     "goals are not capped by it.")
        ceil = None
    for ref, mult in ((F, 5), (D, 4)):
        goal = w1[ref] * mult if w1[ref] else None
        capped = ""
        if goal and ceil and goal > 0.9 * ceil:
            goal, capped = 0.9 * ceil, " (capped: 90% of the load generator's ceiling)"
        r = ratio(w1[S], w1[ref])
        rows.append((f"w1 durable produce ≥ {mult}× {LABEL[ref]}",
                     f"≥ {fmt(goal)} MB/s{capped}",
                     f"{fmt(w1[S])} MB/s = {fmt(r)}× {LABEL[ref]} ({fmt(w1[ref])} MB/s)",
                     met(w1[S] is not None and goal is not None and w1[S] >= goal)))
    for side in ("produce", "consume"):
        for p in ("p99", "p99.99"):
            s, d = latency_ms(results, S, side, p), latency_ms(results, D, side, p)
            r = ratio(s, d)
            what = "produce" if side == "produce" else "end-to-end"
            rows.append((f"w2 {what} {p} ≤ 1/10 of Kafka default", "≤ 0.1×",
                         f"{fmt(s)} ms vs {fmt(d)} ms = {fmt(r)}×", met(r is not None and r <= 0.1)))
    worst = None
    for w in ("w1", "w2", "w3", "w4", "w5"):
        s, d = med(results, S, w, "peak_rss_bytes"), med(results, D, w, "peak_rss_bytes")
        r = ratio(s, d)
        if r is not None and (worst is None or r > worst[0]):
            worst = (r, w, s, d)
    if worst:
        rows.append(("peak RSS ≤ 1/10 of Kafka default's (worst workload)", "≤ 0.1×",
                     f"{worst[1]}: {fmt(worst[2] / 1e6)} MB vs {fmt(worst[3] / 1e6)} MB = "
                     f"{fmt(worst[0])}×", met(worst[0] <= 0.1)))
    floor = get(results, "floor.median") or {}
    # Issue 25's CPU goals are ratios: to the floor of the design (the copies it cannot avoid,
    # perf/cpu_floor) and to Kafka with its defaults, measured in the same run.
    cp, cpd = med(results, S, "w1", "cpu_s_per_gb"), med(results, D, "w1", "cpu_s_per_gb")
    fp = floor.get("produce_floor_s_per_gb")
    rows.append(("broker CPU per GB, durable produce (w1)", "≤ 1.2× the floor and ≤ 0.25× Kafka "
                 "default", f"{fmt(cp)} s = {fmt(ratio(cp, fp))}× the floor ({fmt(fp)} s), "
                 f"{fmt(ratio(cp, cpd))}× Kafka default ({fmt(cpd)} s)",
                 met(cp is not None and fp and cpd and cp <= 1.2 * fp and cp <= 0.25 * cpd)))
    cc, ccd = med(results, S, "w5", "cpu_s_per_gb"), med(results, D, "w5", "cpu_s_per_gb")
    rows.append(("broker CPU per GB, consume (w5)", "≤ 0.5× Kafka default",
                 f"{fmt(cc)} s = {fmt(ratio(cc, ccd))}× Kafka default ({fmt(ccd)} s; floor "
                 f"{fmt(floor.get('consume_floor_s_per_gb'))} s)",
                 met(cc is not None and ccd and cc <= 0.5 * ccd)))
    w5 = {b: med(results, b, "w5", "consume.mb_per_s") for b in BROKERS}
    r = ratio(w5[S], w5[D])
    rows.append(("w5 cold consume ≥ 1.5× Kafka default", "≥ 1.5×",
                 f"{fmt(w5[S])} MB/s vs {fmt(w5[D])} MB/s = {fmt(r)}×",
                 met(r is not None and r >= 1.5)))
    stalls, counted = 0, False
    for runs in results.get("brokers", {}).get(S, {}).values():
        for r in runs if isinstance(runs, list) else []:
            if r.get("reactor_stalls") is not None:
                stalls, counted = stalls + r["reactor_stalls"], True
    rows.append(("reactor stalls over 1 ms during the whole run", "0",
                 f"{stalls} (samsa_reactor_stalls_total over every workload)" if counted
                 else "not counted", met(counted and stalls == 0)))
    disk = get(results, "disk.median")
    pinned = results.get("pinned")
    if pinned:
        dur, src = median([get(r, "produce.mb_per_s") for r in pinned]), "pinned w1"
    else:
        dur, src = w1[S], "w1"
    r = ratio(dur, disk)
    rows.append(("durable throughput ≥ 80% of the disk's raw sequential write",
                 f"≥ {fmt(0.8 * disk if disk else None)} MB/s",
                 f"{src}: {fmt(dur)} MB/s = {fmt(100 * r if r else None)}% of {fmt(disk)} MB/s",
                 met(r is not None and r >= 0.8)))
    rows.append(("durable produce with the replay load generator ≥ 80% of the disk", "≥ 80%",
                 "not measured (no replay mode in samsa-perf yet)", "no"))
    rows.append(("produce p99 with a cold consumer reading beside it ≤ 2× without", "≤ 2×",
                 "not measured (no cold-consumer workload yet)", "no"))
    if ceil:
        notes.append(f"Load generator ceiling (acks=0 into samsa without fsync, w1's shape): "
                     f"{fmt(ceil)} MB/s.")
    notes[:] = [n + "\n" for n in notes]
    return rows, notes


def met(ok):
    return "**yes**" if ok else "no"


def figures_table(results):
    lines = ["| workload | figure | samsa | Kafka default | Kafka+flush | samsa/default | "
             "samsa/flush |", "|---|---|---|---|---|---|---|"]

    def row(w, label, path, scale=1.0, lower_better=False):
        vals = {b: med(results, b, w, path) for b in BROKERS}
        vals = {b: (v * scale if v is not None else None) for b, v in vals.items()}
        s = vals["samsa"]

        def cell(b):
            sp = spread(results, b, w, path)
            if vals[b] is None or not sp or sp[0] == sp[1]:
                return fmt(vals[b])
            return f"{fmt(vals[b])} ({fmt(sp[0] * scale)}–{fmt(sp[1] * scale)})"

        lines.append(f"| {w} | {label} | {cell('samsa')} | {cell('kafka-default')} | "
                     f"{cell('kafka-flush')} | {fmt(ratio(s, vals['kafka-default']))} | "
                     f"{fmt(ratio(s, vals['kafka-flush']))} |")

    row("w1", "MB/s", "produce.mb_per_s")
    row("w1", "records/s", "produce.records_per_s")
    for side, name in (("produce", "produce"), ("consume", "end-to-end")):
        for p in ("p50", "p99", "p99.9", "p99.99", "max"):
            row("w2", f"{name} latency {p} (ms)", f"{side}.latency_us.{p}", 1e-3)
    row("w2", "achieved records/s", "produce.records_per_s")
    row("w3", "MB/s", "produce.mb_per_s")
    row("w3", "records/s", "produce.records_per_s")
    row("w4", "MB/s", "produce.mb_per_s")
    row("w4", "produce latency p99 (ms)", "produce.latency_us.p99", 1e-3)
    row("w5", "MB/s (cold)", "consume.mb_per_s")
    row("w5", "seconds for the backlog", "consume.seconds")
    return lines


def resources_table(results):
    lines = ["| workload | figure | samsa | Kafka default | Kafka+flush | samsa/default |",
             "|---|---|---|---|---|---|"]
    for w in ("w1", "w2", "w3", "w4", "w5"):
        for label, path, scale in (("peak RSS (MB)", "peak_rss_bytes", 1e-6),
                                   ("broker CPU s per GB moved", "cpu_s_per_gb", 1),
                                   ("broker cores busy", "broker_cores", 1),
                                   ("client CPU s", "client_cpu_s", 1)):
            vals = {b: med(results, b, w, path) for b in BROKERS}
            vals = {b: (v * scale if v is not None else None) for b, v in vals.items()}
            lines.append(f"| {w} | {label} | {fmt(vals['samsa'])} | "
                         f"{fmt(vals['kafka-default'])} | {fmt(vals['kafka-flush'])} | "
                         f"{fmt(ratio(vals['samsa'], vals['kafka-default']))} |")
    return lines


def errors(results):
    out = []
    for b, ws in results.get("brokers", {}).items():
        for w, runs in ws.items():
            if not isinstance(runs, list):
                continue
            for i, r in enumerate(runs):
                errs = sum((r.get(s) or {}).get("errors") or 0 for s in ("produce", "consume"))
                closed = r.get("broker_closed_connections") or 0
                if not r.get("ok") or errs or closed:
                    msg = f"- {LABEL.get(b, b)} {w} repetition {i + 1}: {errs} record errors"
                    if closed:
                        msg += f"; the broker closed {closed} client connections (its log)"
                    if r.get("error"):
                        msg += f"; {r['error']}"
                    out.append(msg)
    return out


def plots(results, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["(matplotlib missing: apt-get install python3-matplotlib)"]
    outdir.mkdir(parents=True, exist_ok=True)
    brokers = [b for b in BROKERS if b in results.get("brokers", {})]
    made = []

    # Throughput bars.
    groups = [("w1", "produce.mb_per_s", "w1 durable produce\n1 KiB, acks=all"),
              ("w3", "produce.mb_per_s", "w3 100 B, acks=1"),
              ("w4", "produce.mb_per_s", "w4 64 producers\nacks=all"),
              ("w5", "consume.mb_per_s", "w5 cold consume\n2 GiB")]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / max(1, len(brokers))
    for i, b in enumerate(brokers):
        vals = [med(results, b, w, p) or 0 for w, p, _ in groups]
        xs = [g + i * width for g in range(len(groups))]
        ax.bar(xs, vals, width, label=LABEL[b], color=COLOR[b])
        for x, v in zip(xs, vals):
            ax.text(x, v, f"{v:.0f}", ha="center", va="bottom", fontsize=7)
    disk, ceil = get(results, "disk.median"), ceiling_mb(results)
    if disk:
        ax.axhline(disk, color="gray", ls="--", lw=1, label=f"disk dd oflag=direct {disk:.0f}")
    if ceil:
        ax.axhline(ceil, color="black", ls=":", lw=1, label=f"load generator ceiling {ceil:.0f}")
    ax.set_xticks([g + width * (len(brokers) - 1) / 2 for g in range(len(groups))])
    ax.set_xticklabels([g[2] for g in groups], fontsize=8)
    ax.set_ylabel("MB/s (10⁶ bytes of records)")
    ax.set_title(f"Throughput, medians of {results['config']['repetitions']} runs")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(outdir / "throughput.png", dpi=110)
    plt.close(fig)
    made.append("results/throughput.png")

    # Latency percentile curves (w2): the repetition with the median p99 of each broker.
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, side, title in ((axes[0], "produce", "produce (send → acknowledged)"),
                            (axes[1], "consume", "end-to-end (send → consumed)")):
        for b in brokers:
            runs = [r for r in results["brokers"][b].get("w2", [])
                    if get(r, f"{side}.latency_us.curve")]
            if not runs:
                continue
            runs.sort(key=lambda r: get(r, f"{side}.latency_us.p99"))
            curve = get(runs[len(runs) // 2], f"{side}.latency_us.curve")
            xs = [(-math.log10(1 - q) if q < 1 else 6) for q, _ in curve]
            ax.plot(xs, [max(v / 1000, 1e-3) for _, v in curve], label=LABEL[b], color=COLOR[b])
        ax.set_yscale("log")
        ax.set_xticks([0.301, 1, 2, 3, 4, 5, 6])
        ax.set_xticklabels(["50%", "90%", "99%", "99.9%", "99.99%", "99.999%", "max"], fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("latency (ms)")
    rate = get(results, "brokers.samsa.w2_rate.records_per_s")
    fig.suptitle(f"w2: fixed rate {rate:,.0f} records/s (half of Kafka default's w1), 1 KiB, "
                 "acks=all" if rate else "w2", fontsize=10)
    fig.tight_layout()
    fig.savefig(outdir / "latency.png", dpi=110)
    plt.close(fig)
    made.append("results/latency.png")

    # Resources.
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    ws = ["w1", "w2", "w3", "w4", "w5"]
    for ax, path, scale, ylabel, log in ((axes[0], "peak_rss_bytes", 1e-6, "peak RSS (MB)", True),
                                         (axes[1], "cpu_s_per_gb", 1, "broker CPU s per GB", False)):
        width = 0.8 / max(1, len(brokers))
        for i, b in enumerate(brokers):
            vals = [(med(results, b, w, path) or 0) * scale for w in ws]
            ax.bar([x + i * width for x in range(len(ws))], vals, width, label=LABEL[b],
                   color=COLOR[b])
        ax.set_xticks([x + width * (len(brokers) - 1) / 2 for x in range(len(ws))])
        ax.set_xticklabels(ws)
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")
        ax.legend(fontsize=7)
    floor = get(results, "floor.median") or {}
    if floor.get("produce_floor_s_per_gb"):
        axes[1].axhline(floor["produce_floor_s_per_gb"], color="gray", ls="--", lw=1)
        axes[1].text(4.5, floor["produce_floor_s_per_gb"], "produce floor", fontsize=7,
                     ha="right", va="bottom")
    fig.tight_layout()
    fig.savefig(outdir / "resources.png", dpi=110)
    plt.close(fig)
    made.append("results/resources.png")
    return made


def checks_section(out):
    """The load generator's own check (perf/vs-kafka/validate), if it ran: its verdicts."""
    path = out / "results" / "validation.json"
    if not path.exists():
        return []
    v = json.loads(path.read_text())
    L = ["## samsa-perf against independent tools", "",
         f"From `perf/VALIDATION.md` ({v['date']}, a separate run of `perf/vs-kafka/validate`; "
         "medians of 3, the tools alternating), which has every repetition and why the "
         "fixed-rate figures differ:", "",
         "| broker | check | samsa-perf | independent tool | difference |", "|---|---|---|---|---|"]
    for name, res in v["brokers"].items():
        a = median([r.get("mb_per_s") for r in res["max"]["samsa-perf"]])
        b = median([r.get("mb_per_s") for r in res["max"]["rdkafka_performance"]])
        if a and b:
            L.append(f"| {name} | max rate MB/s vs rdkafka_performance | {fmt(a)} | {fmt(b)} | "
                     f"{(a / b - 1) * 100:+.0f}% |")
        for p in ("p50_ms", "p99_ms"):
            a = median([r.get(p) for r in res["fixed"]["samsa-perf"]])
            b = median([r.get(p) for r in res["fixed"]["ProducerPerformance"]])
            if a and b:
                L.append(f"| {name} | 50 MB/s {p[:-3]} ms (from the send call) vs "
                         f"ProducerPerformance | {fmt(a)} | {fmt(b)} | {(a / b - 1) * 100:+.0f}% |")
    return L + [""]


def micro_section(out):
    """Micro-benchmarks (perf/micro/run), if they ran: each against its same-run baseline."""
    path = out / "results" / "micro.json"
    if not path.exists():
        return []
    m = json.loads(path.read_text())
    L = ["## Micro-benchmarks", "",
         f"`perf/micro/run` on {m['date']} at commit `{m['commit']}` (load average "
         f"{m['load'][0]:.1f}–{m['load'][1]:.1f}); medians of 3 repetitions. Each subject runs "
         "beside its baseline in the same iterations (`perf/README.md` names the baselines); "
         "x_baseline = subject rate / baseline rate.", "",
         "| benchmark | subject | baseline | x_baseline |", "|---|---|---|---|"]
    for r in m["benchmarks"]:
        unit = "B/s" if r["unit"] == "bytes/s" else "/s"
        rate = f"{fmt(r['rate'])} {unit}" if r.get("rate") else "–"
        base = f"{fmt(r['baseline_rate'])} {unit}" if r.get("baseline_rate") else "–"
        x = fmt(r.get("x_baseline"))
        if r.get("x_ceiling") is not None:
            x += f" (x_ceiling {fmt(r['x_ceiling'])})"
        L.append(f"| `{r['name']}` | {rate} | {base} | {x} |")
    return L + [""]


def write(results, out):
    out = Path(out)
    cfg = results["config"]
    m = results["machine"]
    made = plots(results, out / "results")
    rows, notes = targets(results)
    L = ["# samsa against Apache Kafka 4.1.1: results", ""]
    if results.get("quick"):
        L += ["**QUICK RUN (`--quick`): one repetition, short windows. The figures check the "
              "plumbing and mean nothing.**", ""]
    L += [f"Written by `perf/vs-kafka/run` on {results['date']} at commit `{results['commit']}` "
          f"in {results.get('elapsed_s', 0) / 60:.1f} minutes. Every figure is the median of "
          f"{cfg['repetitions']} repetitions; settings are in `perf/vs-kafka/workloads.toml`, "
          "Kafka's in `kafka-server.properties` and `kafka-jvm.flags`, samsa's in "
          "`samsa.properties`, all beside the script. MB = 10⁶ bytes of record keys and values.",
          "",
          f"Machine: {m['cpu']}, {m['cores']} vCPUs, {m['memory_gb']} GB RAM, kernel "
          f"{m['kernel']}, {m['os']}; data on `{m['filesystem']}`; {m['java']}; load generator "
          f"samsa-perf on librdkafka {m['librdkafka']}. The machine is shared with other "
          f"engineers' builds and tests: load average {m['load_at_start'][0]:.1f} at the start, "
          f"{m.get('load_at_end', [0])[0]:.1f} at the end. Expect noise; compare ratios from the "
          "same run.", "",
          "## Targets (issues 8 and 25)", "",
          "| target | goal | measured | met |", "|---|---|---|---|"]
    L += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    L += [""] + notes + ["Where samsa misses a target, `perf/PROFILES.md` says where its time "
                         "(or memory) goes, from profiles of the same workloads.", ""]
    L += ["## Figures", "", "Medians of the undisturbed repetitions, (min–max) beside them.",
          "", *figures_table(results), ""]
    quiet = quiet_table(results)
    if quiet:
        q = cfg.get("quiet", {})
        L += ["## Quiet machine", "",
              f"Each repetition ran with only its broker unpaused (the others SIGSTOPped), after a "
              f"wait (at most {q.get('max_wait_s')} s) for a 2-second window in which processes "
              f"other than the broker and samsa-perf used at most {q.get('threshold_cores')} "
              f"cores; a repetition in which they used more is `disturbed` and not judged. "
              f"Brokers pinned to CPU {q.get('broker_cpus') or '(none)'}, samsa-perf to CPU "
              f"{q.get('client_cpus') or '(none)'}. Kernel threads (writeback, softirqs) are "
              "shown apart: part of them is the broker's own work.", "", *quiet, ""]
    rate = get(results, "brokers.samsa.w2_rate")
    if rate:
        L += [f"w2 ran at {fmt(rate['records_per_s'])} records/s ({rate['basis']} × "
              f"{cfg['w2']['rate_fraction']}); latency counts from each record's intended send "
              "time (open loop), so a stalled broker cannot hide its stalls.", ""]
    L += ["## Resources", "",
          "Broker CPU is user+system time of every thread of the broker process (/proc/PID/stat, "
          "io_uring workers and the JVM's GC and JIT included) over the whole samsa-perf run, "
          "divided by the GB produced plus consumed. Peak RSS is VmHWM after resetting it "
          "(/proc/PID/clear_refs) before each workload.", "", *resources_table(results), ""]
    L += ["## Limits of this machine, measured in the same run", ""]
    disk = results.get("disk", {})
    L.append(f"- Disk, `dd bs={cfg['disk']['dd_bs']} count={cfg['disk']['dd_count']} "
             f"oflag=direct conv=fdatasync` on the brokers' file system: "
             f"{fmt(disk.get('median'))} MB/s (runs: {', '.join(fmt(x) for x in disk.get('mb_per_s', []))}).")
    fl = get(results, "floor.median") or {}
    L.append(f"- CPU floor per GB (`build/perf/cpu_floor`): produce "
             f"{fmt(fl.get('produce_floor_s_per_gb'))} s (recv {fmt(fl.get('recv_s_per_gb'))} + "
             f"CRC32C {fmt(fl.get('crc_s_per_gb'))} + write into new page cache "
             f"{fmt(fl.get('write_s_per_gb'))}); consume {fmt(fl.get('consume_floor_s_per_gb'))} s "
             f"(read {fmt(fl.get('read_s_per_gb'))} + send {fmt(fl.get('send_s_per_gb'))}).")
    for procs, runs in (results.get("ceiling") or {}).items():
        L.append(f"- Load generator ceiling, acks=0 into samsa without fsync, {procs} client "
                 f"process(es): {fmt(median([get(r, 'produce.mb_per_s') for r in runs]))} MB/s, "
                 f"broker {fmt(median([r.get('broker_cores') for r in runs]))} cores busy.")
    pinned = results.get("pinned")
    if pinned:
        L.append("- w1 with samsad pinned to CPU 0 and samsa-perf to CPU 1: "
                 f"{fmt(median([get(r, 'produce.mb_per_s') for r in pinned]))} MB/s; broker "
                 f"{fmt(median([r.get('broker_cores') for r in pinned]))} cores busy, disk busy "
                 f"{fmt(median([100 * (r.get('disk_busy') or 0) for r in pinned]))}% of the time, "
                 f"disk writes {fmt(median([(r.get('disk_write_bytes') or 0) / r['wall_s'] / 1e6 for r in pinned]))} MB/s, "
                 f"client {fmt(median([r.get('client_cpu_s') for r in pinned]))} CPU s.")
    L.append("")
    L += checks_section(out) + micro_section(out)
    if made:
        L += ["## Plots", ""] + [f"![{p}]({p})" for p in made] + [""]
    errs = errors(results)
    L += ["## Errors", ""] + (errs or ["None: every run acknowledged and consumed every record."])
    L.append("")
    # Sections other tools wrote by hand after this marker (perf/dpdk's) survive a rewrite.
    kept = ""
    if (out / "RESULTS.md").exists():
        old = (out / "RESULTS.md").read_text()
        at = old.find(KEEP_MARKER)
        kept = old[at:] if at >= 0 else ""
    (out / "RESULTS.md").write_text("\n".join(L) + ("\n" + kept if kept else ""))
