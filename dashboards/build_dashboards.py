#!/usr/bin/python3
"""Writes the Torus Grafana dashboards (dashboards/*.json, Grafana's classic JSON model, schemaVersion 41).

The JSON files are generated so the four dashboards share one set of template variables, selectors and panel
defaults; edit this file, then run `dashboards/build_dashboards.py` (stdlib only). It also copies the dashboards
and alerts/torus-rules.yaml into charts/torus-operator/files/. Tests fail when a committed file differs from what
this script writes.

Metric names and meanings: docs/observability.md.
"""
import json
import pathlib
import re
import sys

SCHEMA_VERSION = 41
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Every worker query selects one job's series; attempt is multi-valued so a restart's curves continue side by side.
WORKER = 'namespace="$namespace", job="$job", attempt=~"$attempt"'
RATE = "$__rate_interval"


def datasource_variable():
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "refresh": 1,
        "regex": "",
        "options": [],
    }


def query_variable(name, label, query, include_all=False, multi=False):
    variable = {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "definition": query,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 1},
        "current": {},
        "hide": 0,
        "refresh": 2,  # on time range change: new jobs and attempts appear without a reload
        "regex": "",
        "sort": 1,
        "multi": multi,
        "includeAll": include_all,
        "options": [],
    }
    if include_all:
        variable["allValue"] = ".*"
    return variable


def worker_variables():
    return [
        datasource_variable(),
        query_variable("namespace", "Namespace", "label_values(torus_worker_step_seconds_count, namespace)"),
        query_variable("job", "TrainingJob",
                       'label_values(torus_worker_step_seconds_count{namespace="$namespace"}, job)'),
        query_variable("attempt", "Attempt",
                       'label_values(torus_worker_step_seconds_count{namespace="$namespace", job="$job"}, attempt)',
                       include_all=True, multi=True),
    ]


def target(expr, legend="", ref="A", fmt=None):
    t = {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend or "__auto", "range": True, "refId": ref}
    if fmt:
        t["format"] = fmt
    return t


def targets(*pairs):
    """(expr, legend) pairs -> targets with refIds A, B, ..."""
    return [target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(pairs)]


def panel(kind, title, description, panel_targets, unit=None, width=12, height=8, **extra):
    p = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "targets": panel_targets,
        "fieldConfig": {"defaults": {}, "overrides": []},
        "options": {},
        "gridPos": {"w": width, "h": height},
    }
    if unit:
        p["fieldConfig"]["defaults"]["unit"] = unit
    if kind == "timeseries":
        p["fieldConfig"]["defaults"]["custom"] = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 0,
                                                  "showPoints": "never", "spanNulls": False}
        p["options"] = {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                        "tooltip": {"mode": "multi", "sort": "desc"}}
    elif kind in ("stat", "bargauge", "gauge"):
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area", "textMode": "auto", "orientation": "auto"}
    elif kind == "heatmap":
        p["options"] = {"calculate": False, "yAxis": {"unit": unit or "s"}, "cellGap": 1,
                        "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64}}
    p.update(extra)
    return p


def row(title):
    return {"type": "row", "title": title, "collapsed": False, "panels": [], "gridPos": {"w": 24, "h": 1}}


def layout(panels):
    """Assigns ids and packs panels left to right, top to bottom on Grafana's 24-column grid."""
    x = y = row_height = 0
    for i, p in enumerate(panels, start=1):
        p["id"] = i
        w, h = p["gridPos"]["w"], p["gridPos"]["h"]
        if x + w > 24 or p["type"] == "row":
            x, y, row_height = 0, y + row_height, 0
        p["gridPos"].update({"x": x, "y": y})
        x += w
        row_height = max(row_height, h)
        if p["type"] == "row":
            x, y, row_height = 0, y + h, 0
    return panels


def dashboard(uid, title, description, variables, panels):
    return {
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True, "hide": True,
            "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard"}]},
        "description": description,
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [{"asDropdown": True, "includeVars": True, "keepTime": True, "tags": ["torus"], "title": "Torus",
                   "type": "dashboards"}],
        "panels": layout(panels),
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "tags": ["torus"],
        "templating": {"list": variables},
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "title": title,
        "uid": uid,
        "version": 1,
    }


def mean_rate(metric, by="rank"):
    """Mean of a histogram over the rate window: sum rate / count rate, per `by`."""
    return (f"sum by ({by}) (rate({metric}_sum{{{WORKER}}}[{RATE}]))"
            f" / sum by ({by}) (rate({metric}_count{{{WORKER}}}[{RATE}]))")


def job_overview():
    steps_left = f"max(torus_worker_planned_steps{{{WORKER}}}) - max(torus_worker_global_step{{{WORKER}}})"
    steps_per_s = f"max(rate(torus_worker_steps_total{{{WORKER}}}[{RATE}]))"
    panels = [
        panel("stat", "Progress", "Global step over the run's planned steps.",
              targets((f"max(torus_worker_global_step{{{WORKER}}}) / max(torus_worker_planned_steps{{{WORKER}}})",
                       "progress")), unit="percentunit", width=4, height=4),
        panel("stat", "ETA", "Steps left divided by the current step rate.",
              targets((f"({steps_left}) / {steps_per_s}", "eta")), unit="s", width=4, height=4),
        panel("stat", "Epoch", "Current epoch (fractional).",
              targets((f"max(torus_worker_epoch{{{WORKER}}})", "epoch"),
                      (f"max(torus_worker_planned_epochs{{{WORKER}}})", "of")), unit="none", width=4, height=4),
        panel("stat", "Throughput", "Training images per second, all ranks.",
              targets((f"sum(rate(torus_worker_images_total{{{WORKER}}}[{RATE}]))", "images/s")),
              unit="none", width=4, height=4),
        panel("stat", "Validation accuracy", "Last validation top-1 accuracy.",
              targets((f"max(torus_worker_validation_accuracy{{{WORKER}}})", "accuracy")),
              unit="percentunit", width=4, height=4),
        panel("stat", "Target reached", "1 once validation accuracy reached spec.training.targetAccuracy.",
              targets((f"max(torus_worker_target_accuracy_reached{{{WORKER}}})", "reached")),
              unit="bool_yes_no", width=4, height=4),
        row("Learning curves"),
        panel("timeseries", "Training loss", "Training loss, mean over ranks, per attempt.",
              targets((f"avg by (attempt) (torus_worker_loss{{{WORKER}}})", "loss (attempt {{attempt}})"))),
        panel("timeseries", "Accuracy", "Validation and training accuracy against the target.",
              targets((f"max by (attempt) (torus_worker_validation_accuracy{{{WORKER}}})",
                       "validation (attempt {{attempt}})"),
                      (f"avg by (attempt) (torus_worker_train_accuracy{{{WORKER}}})", "train (attempt {{attempt}})"),
                      (f"max(torus_worker_target_accuracy{{{WORKER}}})", "target")),
              unit="percentunit"),
        panel("timeseries", "Throughput", "Training images per second, all ranks, and as the ranks report it.",
              targets((f"sum by (attempt) (rate(torus_worker_images_total{{{WORKER}}}[{RATE}]))",
                       "images/s (attempt {{attempt}})"),
                      (f"sum by (attempt) (torus_worker_images_per_second{{{WORKER}}})",
                       "reported (attempt {{attempt}})"))),
        panel("timeseries", "Step time", "Mean optimizer step time over ranks and where it goes: data wait + "
              "compute + communication wait make up the step.",
              targets((f"avg({mean_rate('torus_worker_step_seconds')})", "step"),
                      (f"avg({mean_rate('torus_worker_compute_seconds')})", "compute"),
                      (f"avg({mean_rate('torus_worker_comm_wait_seconds')})", "communication wait"),
                      (f"avg({mean_rate('torus_worker_data_wait_seconds')})", "data wait")), unit="s"),
        row("Goodput"),
        panel("timeseries", "Goodput", "Share of rank 0's time spent training (the steps' own work), per attempt: "
              "torus_worker_goodput_seconds_total{part=\"training\"} over all its parts. The job's whole-run figure, "
              "with the work lost to restarts, is status.goodput (kubectl get tj -o yaml) and torus run's summary.",
              targets((f"sum by (attempt) (rate(torus_worker_goodput_seconds_total{{{WORKER}, rank=\"0\", "
                       f"part=\"training\"}}[{RATE}])) / sum by (attempt) (rate(torus_worker_goodput_seconds_total"
                       f"{{{WORKER}, rank=\"0\"}}[{RATE}]))", "goodput (attempt {{attempt}})")),
              unit="percentunit"),
        panel("timeseries", "Where the time goes", "Rank 0's seconds per second by part of the goodput ledger: "
              "startup, restore, training, data_wait, comm_wait, evaluation, checkpoint (stacked, they sum to 1 "
              "while the rank runs).",
              targets((f"sum by (part) (rate(torus_worker_goodput_seconds_total{{{WORKER}, rank=\"0\"}}[{RATE}]))",
                       "{{part}}")),
              unit="percentunit", fieldConfig={"defaults": {"unit": "percentunit", "custom": {
                  "drawStyle": "line", "lineWidth": 1, "fillOpacity": 60, "showPoints": "never", "spanNulls": False,
                  "stacking": {"mode": "normal", "group": "A"}}}, "overrides": []}),
        row("Schedule"),
        panel("timeseries", "Learning rate", "Learning rate as the schedule sets it.",
              targets((f"max(torus_worker_learning_rate{{{WORKER}}})", "lr")), width=8),
        panel("timeseries", "Batch size", "Global and per-rank batch size of the current phase.",
              targets((f"max(torus_worker_global_batch_size{{{WORKER}}})", "global"),
                      (f"max(torus_worker_batch_size{{{WORKER}}})", "per rank")), width=8),
        panel("timeseries", "Image size", "Training image size of the current phase (progressive resizing).",
              targets((f"max(torus_worker_image_size_pixels{{{WORKER}}})", "pixels")), width=8),
    ]
    return dashboard("torus-job-overview", "Torus / Job overview",
                     "One TrainingJob: progress, ETA, learning curves, throughput and its LR / batch / image-size "
                     "schedule.", worker_variables(), panels)


def ranks():
    relative = (f"({mean_rate('torus_worker_compute_seconds', 'namespace, job, attempt, rank')})"
                f" / on (namespace, job, attempt) group_left () quantile by (namespace, job, attempt) (0.5, "
                f"{mean_rate('torus_worker_compute_seconds', 'namespace, job, attempt, rank')})")
    panels = [
        panel("bargauge", "Compute time vs. gang median",
              "Each rank's compute time over the gang's median. A straggler stands out above 1; the "
              "TorusStragglerRank alert fires above 1.5.",
              targets((relative, "rank {{rank}}")), unit="none", width=24, height=6,
              fieldConfig={"defaults": {"unit": "none", "min": 0, "max": 2, "thresholds": {
                  "mode": "absolute", "steps": [{"color": "green", "value": None}, {"color": "orange", "value": 1.2},
                                                {"color": "red", "value": 1.5}]}}, "overrides": []}),
        panel("timeseries", "Compute time by rank",
              "Forward, backward and update without waits for data or peers. Step time is equal on every rank in "
              "synchronous training (all wait for the slowest), so this is the panel that names a straggler.",
              targets((mean_rate("torus_worker_compute_seconds"), "rank {{rank}}")), unit="s"),
        panel("timeseries", "Communication wait by rank",
              "Time a step blocked on communication after its own work (gradient all-reduce not hidden behind "
              "backward, step agreement). A straggler waits least: the others wait for it. High on every rank "
              "with even compute: communication-bound.",
              targets((mean_rate("torus_worker_comm_wait_seconds"), "rank {{rank}}")), unit="s"),
        panel("timeseries", "Step time by rank", "Wall time of one optimizer step.",
              targets((mean_rate("torus_worker_step_seconds"), "rank {{rank}}")), unit="s"),
        panel("heatmap", "Step time distribution", "All ranks' step times.",
              [target(f"sum by (le) (rate(torus_worker_step_seconds_bucket{{{WORKER}}}[{RATE}]))", "{{le}}",
                      fmt="heatmap")], unit="s"),
        panel("timeseries", "Data wait by rank", "Mean time a step waited for its batch.",
              targets((mean_rate("torus_worker_data_wait_seconds"), "rank {{rank}}")), unit="s"),
        panel("timeseries", "Seconds since last progress", "Time since each rank last finished a step; a hung "
              "collective makes every rank climb.",
              targets((f"time() - torus_worker_last_progress_timestamp_seconds{{{WORKER}}}", "rank {{rank}}")),
              unit="s"),
        panel("timeseries", "Collective sequence by rank",
              "Collectives started per rank; in a hang the rank with the lowest number is the one the others wait "
              "for.", targets((f"torus_worker_collective_sequence{{{WORKER}}}", "rank {{rank}}")), unit="none"),
        panel("timeseries", "Throughput by rank", "Images per second per rank.",
              targets((f"sum by (rank) (rate(torus_worker_images_total{{{WORKER}}}[{RATE}]))", "rank {{rank}}"))),
        panel("timeseries", "Memory by rank", "Resident memory and GPU memory of each rank.",
              targets((f"torus_worker_resident_memory_bytes{{{WORKER}}}", "rss rank {{rank}}"),
                      (f"torus_worker_device_memory_bytes{{{WORKER}}}", "gpu rank {{rank}}")), unit="bytes"),
        panel("timeseries", "Checkpoint time by rank", "Mean time to write a checkpoint over the attempt.",
              targets((f"torus_worker_checkpoint_seconds_sum{{{WORKER}}}"
                       f" / torus_worker_checkpoint_seconds_count{{{WORKER}}}", "rank {{rank}}")), unit="s"),
    ]
    return dashboard("torus-ranks", "Torus / Ranks",
                     "Per-rank view of one TrainingJob: stragglers, data stalls, hangs, memory.",
                     worker_variables(), panels)


def communication():
    by = "algorithm, level"
    panels = [
        panel("timeseries", "Bus bandwidth", "All-reduce bus bandwidth (algorithm bandwidth * 2(n-1)/n) by "
              "algorithm and level, mean over ranks; dashed: the start-of-run baseline.",
              targets((f"avg by ({by}) (torus_worker_allreduce_bus_bandwidth_bytes_per_second{{{WORKER}}})",
                       "{{algorithm}} / {{level}}"),
                      (f"avg by ({by}) (torus_worker_allreduce_bus_bandwidth_baseline_bytes_per_second{{{WORKER}}})",
                       "{{algorithm}} / {{level}} baseline")), unit="Bps", width=24),
        panel("timeseries", "Share of step in all-reduce", "All-reduce time over step time, per rank.",
              targets((f"sum by (rank) (rate(torus_worker_allreduce_seconds_sum{{{WORKER}}}[{RATE}]))"
                       f" / sum by (rank) (rate(torus_worker_step_seconds_sum{{{WORKER}}}[{RATE}]))",
                       "rank {{rank}}")), unit="percentunit"),
        panel("timeseries", "All-reduce time", "Median and 99th percentile all-reduce time by algorithm and level.",
              targets((f"histogram_quantile(0.5, sum by (le, {by}) "
                       f"(rate(torus_worker_allreduce_seconds_bucket{{{WORKER}}}[{RATE}])))",
                       "p50 {{algorithm}} / {{level}}"),
                      (f"histogram_quantile(0.99, sum by (le, {by}) "
                       f"(rate(torus_worker_allreduce_seconds_bucket{{{WORKER}}}[{RATE}])))",
                       "p99 {{algorithm}} / {{level}}")), unit="s"),
        panel("timeseries", "All-reduce volume", "Bytes all-reduced per second, summed over ranks.",
              targets((f"sum by ({by}) (rate(torus_worker_allreduce_bytes_total{{{WORKER}}}[{RATE}]))",
                       "{{algorithm}} / {{level}}")), unit="Bps"),
        panel("timeseries", "All-reduce calls", "All-reduce calls per second, summed over ranks.",
              targets((f"sum by ({by}) (rate(torus_worker_allreduce_calls_total{{{WORKER}}}[{RATE}]))",
                       "{{algorithm}} / {{level}}")), unit="ops"),
        panel("timeseries", "Bus bandwidth by rank", "Each rank's last bus bandwidth, per algorithm and level.",
              targets((f"torus_worker_allreduce_bus_bandwidth_bytes_per_second{{{WORKER}}}",
                       "rank {{rank}} {{algorithm}} / {{level}}")), unit="Bps", width=24),
    ]
    return dashboard("torus-communication", "Torus / Communication",
                     "All-reduce of one TrainingJob: bus bandwidth by algorithm and level against its start-of-run "
                     "baseline, and the share of the step it takes.", worker_variables(), panels)


def operator_health():
    ns = 'namespace=~"$namespace"'
    variables = [
        datasource_variable(),
        query_variable("namespace", "Namespace", "label_values(torus_operator_jobs, namespace)",
                       include_all=True, multi=True),
        query_variable("job", "TrainingJob", 'label_values(torus_operator_gang_restarts_total{namespace=~"$namespace"}, job)',
                       include_all=True, multi=True),
    ]
    panels = [
        panel("stat", "Leader", "Replicas that hold the leader lease (exactly 1 is healthy).",
              targets(("sum(torus_operator_leader)", "leaders")), unit="none", width=6, height=4),
        panel("stat", "Work queue", "Keys waiting to be reconciled.",
              targets(("sum(torus_operator_workqueue_depth)", "depth")), unit="none", width=6, height=4),
        panel("stat", "Running jobs", "TrainingJobs in phase Running.",
              targets((f'sum(torus_operator_jobs{{{ns}, phase="Running"}}) or vector(0)', "running")),
              unit="none", width=6, height=4),
        panel("stat", "Build", "Operator version(s) running.",
              targets(("count by (version) (torus_operator_build_info)", "{{version}}")), unit="none", width=6,
              height=4),
        panel("timeseries", "Jobs by phase", "TrainingJobs per phase.",
              targets((f"sum by (phase) (torus_operator_jobs{{{ns}}})", "{{phase}}"))),
        panel("timeseries", "Gang restarts", "Gang restarts per job and reason over the last hour.",
              targets((f'sum by (job, reason) (increase(torus_operator_gang_restarts_total{{{ns}, job=~"$job"}}[1h]))'
                       " or vector(0)", "{{job}} {{reason}}"))),
        panel("timeseries", "Reconciles", "Reconcile calls and failures per second.",
              targets((f"sum(rate(torus_operator_reconciles_total[{RATE}]))", "reconciles"),
                      (f"sum by (reason) (rate(torus_operator_reconcile_errors_total[{RATE}])) or vector(0)",
                       "errors {{reason}}")), unit="ops"),
        panel("timeseries", "Reconcile duration", "Median and 99th percentile reconcile time.",
              targets((f"histogram_quantile(0.5, sum by (le) (rate(torus_operator_reconcile_seconds_bucket[{RATE}])))",
                       "p50"),
                      (f"histogram_quantile(0.99, sum by (le) (rate(torus_operator_reconcile_seconds_bucket[{RATE}])))",
                       "p99")), unit="s"),
        panel("timeseries", "Time to Running", "From creation to every worker running, over the dashboard's range.",
              targets((f"histogram_quantile(0.5, sum by (le) (increase(torus_operator_time_to_running_seconds_bucket"
                       f"{{{ns}}}[$__range])))", "p50"),
                      (f"histogram_quantile(0.9, sum by (le) (increase(torus_operator_time_to_running_seconds_bucket"
                       f"{{{ns}}}[$__range])))", "p90")), unit="s"),
        panel("timeseries", "Time to first step", "From creation to the first optimizer step.",
              targets((f"histogram_quantile(0.5, sum by (le) (increase("
                       f"torus_operator_time_to_first_step_seconds_bucket{{{ns}}}[$__range])))", "p50"),
                      (f"histogram_quantile(0.9, sum by (le) (increase("
                       f"torus_operator_time_to_first_step_seconds_bucket{{{ns}}}[$__range])))", "p90")), unit="s"),
        panel("timeseries", "API requests", "Kubernetes API requests per second by verb and code.",
              targets((f"sum by (verb, code) (rate(torus_operator_api_requests_total[{RATE}]))", "{{verb}} {{code}}")),
              unit="reqps"),
        panel("timeseries", "API errors", "Failed Kubernetes API requests per second by verb and code.",
              targets((f"sum by (verb, code) (rate(torus_operator_api_request_errors_total[{RATE}])) or vector(0)",
                       "{{verb}} {{code}}")), unit="reqps"),
    ]
    return dashboard("torus-operator", "Torus / Operator health",
                     "The Torus operator: leadership, reconcile rate and latency, jobs by phase, restarts, API errors.",
                     variables, panels)


DASHBOARDS = {
    "torus-job-overview.json": job_overview,
    "torus-ranks.json": ranks,
    "torus-communication.json": communication,
    "torus-operator.json": operator_health,
}


# The metric names are declared once, in common/metrics/metric_names.h (the worker and the operator register and read
# them from there); a query of any other name is refused, so a renamed metric cannot leave a panel empty.
METRIC_NAMES_HEADER = pathlib.Path(__file__).resolve().parent.parent / "common" / "metrics" / "metric_names.h"
SERIES_SUFFIXES = ("_bucket", "_sum", "_count")


def declared_metrics():
    text = METRIC_NAMES_HEADER.read_text()
    return set(re.findall(r'inline constexpr char k\w+\[\] =\s*"(torus_[a-z0-9_]+)";', text))


def undeclared_metrics(text, declared):
    """The torus_* names `text` reads that metric_names.h does not declare (a histogram's series by its name)."""
    missing = set()
    for used in re.findall(r"\btorus_(?:worker|operator)_[a-z0-9_]+", text):
        base = next((used[: -len(s)] for s in SERIES_SUFFIXES if used.endswith(s) and used[: -len(s)] in declared),
                    used)
        if base not in declared:
            missing.add(used)
    return sorted(missing)


def render(build):
    text = json.dumps(build(), indent=2, sort_keys=False) + "\n"
    missing = undeclared_metrics(text, declared_metrics())
    if missing:
        raise SystemExit(f"{build.__name__}: queries metrics {METRIC_NAMES_HEADER} does not declare: "
                         + ", ".join(missing))
    return text


def main(argv):
    """build_dashboards.py [OUT_DIR]: writes the dashboards to OUT_DIR (a test compares), or, without an argument,
    to dashboards/ and, with the alerting rules, into the Helm chart's files/ (Helm reads only its own tree)."""
    here = pathlib.Path(__file__).resolve().parent
    if len(argv) > 1:
        out_dirs = [pathlib.Path(argv[1])]
    else:
        chart_files = here.parent / "charts" / "torus-operator" / "files"
        (chart_files / "dashboards").mkdir(parents=True, exist_ok=True)
        (chart_files / "torus-rules.yaml").write_text((here / "alerts" / "torus-rules.yaml").read_text())
        out_dirs = [here, chart_files / "dashboards"]
    for out_dir in out_dirs:
        for name, build in DASHBOARDS.items():
            (out_dir / name).write_text(render(build))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
