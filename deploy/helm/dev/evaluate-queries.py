#!/usr/bin/env python3
"""Evaluates every query of the Grafana dashboard and every alerting rule
against a running Prometheus (its HTTP API), the way Grafana would show them.

  evaluate-queries.py PROMETHEUS_URL DASHBOARD_JSON SINCE_UNIX_TIME

Dashboard variables: $job, $instance and $shop match everything, $__rate_interval
is 1m (Grafana's value at a 15 s scrape interval). For each target it prints
the series at the end and how many points of the range since SINCE are NaN;
for each alert its health and state, and the series its expression returns
now (empty = not firing). The alerts come from the server's /api/v1/rules,
so load files/alerts.yaml there (rule_files). Python 3 standard library
only; used by prometheus-demo.sh.
"""
import json
import math
import sys
import time
import urllib.parse
import urllib.request


def api(base, path, **params):
    with urllib.request.urlopen(base.rstrip("/") + "/api/v1/" + path + "?" + urllib.parse.urlencode(params)) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{path} {params}: {body}")
    return body["data"]


def panels(ps):
    for p in ps:
        yield p
        yield from panels(p.get("panels", []))


def describe(base, expr, start, end):
    now = api(base, "query", query=expr)
    res = now["result"] if now["resultType"] == "vector" else []
    shown = ", ".join(
        "{}={:.4g}".format(
            {k: v for k, v in r["metric"].items() if k not in ("job", "instance", "__name__")} or "",
            float(r["value"][1]))
        for r in res[:5])
    nan_now = sum(math.isnan(float(r["value"][1])) for r in res)
    pts = nan = 0
    for r in api(base, "query_range", query=expr, start=start, end=end, step="15s")["result"]:
        for _, v in r["values"]:
            pts += 1
            nan += math.isnan(float(v))
    return len(res), nan_now, pts, nan, shown


def main():
    base, dashboard, since = sys.argv[1], sys.argv[2], float(sys.argv[3])
    end = time.time()
    with_data = empty = with_nan = 0
    for p in panels(json.load(open(dashboard))["panels"]):
        if p.get("type") == "row":
            continue
        series = nans = 0
        for t in p.get("targets", []):
            expr = t["expr"].replace("$job", ".*").replace("$instance", ".*").replace("$shop", ".*").replace("$__rate_interval", "1m")
            n, nan_now, pts, nan, shown = describe(base, expr, since, end)
            series += n
            nans += nan
            print(f'panel {p["id"]:>2} {p["title"]!r} {t["refId"]}: {n} series now [{shown}], '
                  f'{pts} points since start, {nan} NaN')
        with_data += series > 0
        empty += series == 0
        with_nan += nans > 0
    print(f"== panels: {with_data} with data, {empty} empty, {with_nan} with NaN points")
    firing = 0
    for g in api(base, "rules", type="alert")["groups"]:
        for r in g["rules"]:
            n, _, _, _, shown = describe(base, r["query"], since, end)
            firing += n > 0
            print(f'alert {r["name"]}: health {r["health"]}, state {r["state"]}, '
                  f'{n} series now [{shown}]{" " + r.get("lastError", "") if r.get("lastError") else ""}')
    print(f"== alerts: {firing} with a series now (firing or pending)")


if __name__ == "__main__":
    main()
