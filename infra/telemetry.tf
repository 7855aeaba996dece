# The operator's view from the functions' OpenTelemetry metrics
# (shared/telemetry), which the functions export over OTLP to the
# Telemetry API (telemetry.googleapis.com). It writes them as Google Cloud
# Managed Service for Prometheus does: prometheus.googleapis.com/<name>/<kind>
# on a prometheus_target resource (namespace: better-compute, job: the
# Cloud Run service, instance: the instance), the name kept as the code
# has it
# (https://docs.cloud.google.com/stackdriver/docs/reference/telemetry/v1.metrics).
# Their spans go to Cloud Trace. A dashboard and the three alerts; each
# alert's runbook is a section of README.md ("Runbooks"). infra's test
# checks that every metric, kind and label named here is one the code
# records.
#
# monitoring.tf's log-based metrics stay on its dashboard; the alerts that
# read them moved here, on these metrics, under the same addresses.

locals {
  # Each metric's kind, the last part of its type: counter (a counter),
  # gauge or histogram (telemetry.Kinds).
  otel_kinds = {
    "reconcile.lag"        = "histogram"
    "reconcile.runs"       = "counter"
    "provider.calls"       = "counter"
    "provider.budget.used" = "counter"
    "outbox.backlog"       = "gauge"
    "outbox.oldest_age"    = "gauge"
    "watchdog.restarts"    = "counter"
    "join.calls"           = "counter"
  }
  otel_metric = { for name, kind in local.otel_kinds : name => "prometheus.googleapis.com/${name}/${kind}" }
  # The functions of this deployment (its Cloud Run services).
  otel_resource = "resource.type=\"prometheus_target\" AND resource.label.namespace=\"better-compute\" AND resource.label.job=starts_with(\"${var.prefix}-\")"

  # GKE answers that count as errors: the provider's trouble or ours
  # (rate limits, lost grants, another operation running), not a
  # cluster that is gone (NOT_FOUND) nor a tenant's bad request.
  provider_error_codes = ["Unavailable", "DeadlineExceeded", "Internal", "Unknown", "ResourceExhausted", "Aborted", "FailedPrecondition", "PermissionDenied", "Unauthenticated"]
  provider_errors      = "metric.type=\"${local.otel_metric["provider.calls"]}\" AND metric.label.code=one_of(${join(", ", [for c in local.provider_error_codes : "\"${c}\""])})"
}

# The Telemetry API takes the functions' OTLP exports; Cloud Trace keeps
# and shows the spans.
resource "google_project_service" "telemetry" {
  for_each           = toset(["telemetry.googleapis.com", "cloudtrace.googleapis.com"])
  service            = each.key
  disable_on_destroy = false
}

moved {
  from = google_project_service.cloudtrace
  to   = google_project_service.telemetry["cloudtrace.googleapis.com"]
}

# The functions write their metrics and spans through the Telemetry API.
resource "google_project_iam_member" "telemetry" {
  for_each = { for pair in setproduct(keys(local.runtime), ["roles/telemetry.metricsWriter", "roles/telemetry.tracesWriter"]) : "${pair[0]}/${pair[1]}" => pair }
  project  = var.project
  role     = each.value[1]
  member   = "serviceAccount:${local.runtime[each.value[0]]}"
}

resource "google_monitoring_alert_policy" "outbox_stale" {
  display_name          = "${var.prefix}: outbox events older than 5 minutes"
  combiner              = "OR"
  notification_channels = var.alert_notification_channels
  severity              = "ERROR"

  # The watchdog's pass (each minute) found a committed event that has
  # waited more than 5 minutes for Pub/Sub.
  conditions {
    display_name = "Oldest outbox event older than 5 minutes"
    condition_threshold {
      filter          = "metric.type=\"${local.otel_metric["outbox.oldest_age"]}\" AND ${local.otel_resource}"
      comparison      = "COMPARISON_GT"
      threshold_value = 300
      duration        = "0s"
      aggregations {
        alignment_period     = "60s"
        per_series_aligner   = "ALIGN_MAX"
        cross_series_reducer = "REDUCE_MAX"
      }
      trigger {
        count = 1
      }
    }
  }

  # No watchdog pass at all: nothing drains the outbox (nor restarts
  # chains, nor measures the outbox), so its age is unknown and growing.
  conditions {
    display_name = "No watchdog pass for 5 minutes"
    condition_absent {
      filter   = "metric.type=\"run.googleapis.com/request_count\" AND resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"${local.watchdog_service}\""
      duration = "300s"
      aggregations {
        alignment_period     = "60s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }
      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "1800s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Committed events are not reaching Pub/Sub. Runbook: README.md, \"Runbooks\", \"Outbox older than 5 minutes\"."
  }

  depends_on = [google_project_service.apis]
}

resource "google_monitoring_alert_policy" "watchdog_restarts" {
  display_name          = "${var.prefix}: watchdog restarting reconcile chains"
  combiner              = "OR"
  notification_channels = var.alert_notification_channels
  severity              = "WARNING"

  conditions {
    display_name = "More than ${var.watchdog_restarts_threshold} chains restarted in 15 minutes"
    condition_threshold {
      filter          = "metric.type=\"${local.otel_metric["watchdog.restarts"]}\" AND ${local.otel_resource}"
      comparison      = "COMPARISON_GT"
      threshold_value = var.watchdog_restarts_threshold
      duration        = "0s"
      aggregations {
        alignment_period     = "900s"
        per_series_aligner   = "ALIGN_DELTA"
        cross_series_reducer = "REDUCE_SUM"
      }
      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Reconcile chains die (lost or failed Cloud Tasks) and the watchdog restarts them. Runbook: README.md, \"Runbooks\", \"Watchdog restarts rising\"."
  }

  depends_on = [google_project_service.apis]
}

resource "google_monitoring_alert_policy" "provider_errors" {
  display_name          = "${var.prefix}: GKE errors"
  combiner              = "OR"
  notification_channels = var.alert_notification_channels
  severity              = "WARNING"

  conditions {
    display_name = "More than ${var.provider_errors_threshold} GKE errors in 10 minutes"
    condition_threshold {
      filter          = "${local.provider_errors} AND ${local.otel_resource}"
      comparison      = "COMPARISON_GT"
      threshold_value = var.provider_errors_threshold
      duration        = "0s"
      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_DELTA"
        cross_series_reducer = "REDUCE_SUM"
      }
      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "GKE calls keep failing; clusters and node pools stop converging. Runbook: README.md, \"Runbooks\", \"Provider errors above the threshold\"."
  }

  depends_on = [google_project_service.apis]
}

locals {
  # The dashboard's charts, two per row after the alerts' row: each a
  # metric, how its points are aligned and combined, and the labels its
  # lines are split by (a chart with reducers draws one line per reducer).
  otel_charts = [
    { title = "Reconcile lag (desired change to converged), p50 and p99, by kind", filter = "metric.type=\"${local.otel_metric["reconcile.lag"]}\"", aligner = "ALIGN_DELTA", reducers = ["REDUCE_PERCENTILE_50", "REDUCE_PERCENTILE_99"], group = ["metric.label.kind"] },
    { title = "Reconcile runs per second, by kind and outcome", filter = "metric.type=\"${local.otel_metric["reconcile.runs"]}\"", aligner = "ALIGN_RATE", reducers = ["REDUCE_SUM"], group = ["metric.label.kind", "metric.label.outcome"] },
    { title = "GKE calls per second, by method and code", filter = "metric.type=\"${local.otel_metric["provider.calls"]}\"", aligner = "ALIGN_RATE", reducers = ["REDUCE_SUM"], group = ["metric.label.method", "metric.label.code"] },
    { title = "GKE errors (the alert's), by method and code", filter = local.provider_errors, aligner = "ALIGN_DELTA", reducers = ["REDUCE_SUM"], group = ["metric.label.method", "metric.label.code"] },
    { title = "GKE calls charged to each provider project's budget, per second", filter = "metric.type=\"${local.otel_metric["provider.budget.used"]}\"", aligner = "ALIGN_RATE", reducers = ["REDUCE_SUM"], group = ["metric.label.project"] },
    { title = "Oldest outbox event the watchdog found (seconds)", filter = "metric.type=\"${local.otel_metric["outbox.oldest_age"]}\"", aligner = "ALIGN_MAX", reducers = ["REDUCE_MAX"], group = [] },
    { title = "Outbox events older than the grace the watchdog found", filter = "metric.type=\"${local.otel_metric["outbox.backlog"]}\"", aligner = "ALIGN_MAX", reducers = ["REDUCE_MAX"], group = [] },
    { title = "Chains restarted by the watchdog, by kind", filter = "metric.type=\"${local.otel_metric["watchdog.restarts"]}\"", aligner = "ALIGN_DELTA", reducers = ["REDUCE_SUM"], group = ["metric.label.kind"] },
    { title = "Join calls per second, by result", filter = "metric.type=\"${local.otel_metric["join.calls"]}\"", aligner = "ALIGN_RATE", reducers = ["REDUCE_SUM"], group = ["metric.label.result"] },
  ]

  otel_alert_tiles = [
    for i, p in [google_monitoring_alert_policy.outbox_stale, google_monitoring_alert_policy.watchdog_restarts, google_monitoring_alert_policy.provider_errors] : {
      xPos   = i * 16
      yPos   = 0
      width  = 16
      height = 12
      widget = { title = p.display_name, alertChart = { name = p.name } }
    }
  ]

  otel_chart_tiles = [
    for i, c in local.otel_charts : {
      xPos   = (i % 2) * 24
      yPos   = 12 + floor(i / 2) * 16
      width  = 24
      height = 16
      widget = {
        title = c.title
        xyChart = {
          dataSets = [
            for r in c.reducers : {
              plotType = "LINE"
              timeSeriesQuery = {
                timeSeriesFilter = {
                  filter = "${c.filter} AND ${local.otel_resource}"
                  aggregation = {
                    alignmentPeriod    = "60s"
                    perSeriesAligner   = c.aligner
                    crossSeriesReducer = r
                    groupByFields      = c.group
                  }
                }
              }
            }
          ]
        }
      }
    }
  ]
}

resource "google_monitoring_dashboard" "telemetry" {
  dashboard_json = jsonencode({
    displayName  = "${var.prefix}: reconcile lag, runs, GKE calls, outbox"
    mosaicLayout = { columns = 48, tiles = concat(local.otel_alert_tiles, local.otel_chart_tiles) }
  })

  depends_on = [google_project_service.apis]
}
