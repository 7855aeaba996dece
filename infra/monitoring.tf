# The operator's view: log-based metrics counted from the structured logs
# the functions already write (shared/logging: jsonPayload.message is the
# slog message), a dashboard, and four alerts. Each alert's runbook is a
# section of README.md ("Runbooks"), or, for the pool events' dead letters,
# in its documentation. infra's test checks that every message a filter
# names is one the code logs.

locals {
  # Log entries of this deployment's functions.
  functions_logs = "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=~\"^${var.prefix}-\""

  log_metrics = {
    # The watchdog's drain found outbox events older than WATCHDOG_GRACE
    # (shared/outbox.Relay.Drain): their first publish failed or their
    # process died.
    outbox_drains = {
      description = "Watchdog passes that found outbox events to publish (older than WATCHDOG_GRACE)."
      filter      = "${local.functions_logs} AND jsonPayload.message=\"Draining outbox\""
      labels      = {}
    }
    # A publish to Pub/Sub failed; the events wait in the outbox.
    outbox_publish_failures = {
      description = "Publishes of committed events that failed or were not tried; the events wait in the outbox for the watchdog."
      filter      = "${local.functions_logs} AND (jsonPayload.message=\"Events left in the outbox for a later drain\" OR jsonPayload.message=\"Events wait in the outbox for the watchdog's drain\" OR jsonPayload.message=\"Relay queue full; events wait in the outbox for a drain\")"
      labels      = {}
    }
    # shared/chain.Watchdog: a subject's next run was overdue (an enqueue
    # failed, a task was lost) and its chain was restarted.
    chain_restarts = {
      description = "Reconcile chains the watchdog restarted, by kind of subject."
      filter      = "${local.functions_logs} AND jsonPayload.message=\"Restarting a dead reconcile chain\""
      labels      = { kind = "EXTRACT(jsonPayload.kind)" }
    }
    # shared/clusters: a GKE call failed for a reason worth retrying (call
    # names it), or a GKE read failed the run (call is empty: GetOperation,
    # GetCluster or ListOperations, named at the start of the error).
    provider_errors = {
      description = "GKE calls that failed transiently, by call (empty: a read that failed the run)."
      filter      = "${local.functions_logs} AND (jsonPayload.message=\"Provider call failed; retrying with backoff\" OR (jsonPayload.message=\"Reconcile run failed; retrying with backoff\" AND jsonPayload.error=~\"^(get operation|get cluster|list operations)\"))"
      labels      = { call = "EXTRACT(jsonPayload.call)" }
    }
    # GKE refused a call for the tenant's reason (bad machine type, quota):
    # the pool or cluster shows error. Not an alert: tenants cause it.
    provider_refusals = {
      description = "GKE calls refused for the tenant's reason, by call."
      filter      = "${local.functions_logs} AND jsonPayload.message=\"The provider refused the call\""
      labels      = { call = "EXTRACT(jsonPayload.call)" }
    }
    # kubernetesSubstrates-poolEvents acknowledged a pool event it can
    # never apply (redelivering it would not help), by the pool event's
    # type; a malformed one also puts its pool's substrate in error.
    pool_events_dropped = {
      description = "Pool events the substrates' consumer dropped (malformed, of an unknown type, unreadable), by type."
      filter      = "${local.functions_logs} AND (jsonPayload.message=\"Malformed pool event dropped\" OR jsonPayload.message=\"Pool event of an unknown type dropped\" OR jsonPayload.message=\"Event of an unexpected type dropped\" OR jsonPayload.message=\"Pub/Sub message that cannot be read dropped\")"
      labels      = { type = "EXTRACT(jsonPayload.type)" }
    }
    # functions/reconcile: a run ended in an error; Cloud Tasks retries it.
    reconcile_failures = {
      description = "Reconcile runs that failed and that Cloud Tasks retries."
      filter      = "${local.functions_logs} AND jsonPayload.message=\"Reconcile run failed; Cloud Tasks will retry it\""
      labels      = {}
    }
  }

  user_metric = "logging.googleapis.com/user/%s"
}

resource "google_logging_metric" "functions" {
  for_each    = local.log_metrics
  name        = "${var.prefix}_${each.key}"
  description = each.value.description
  filter      = each.value.filter

  metric_descriptor {
    metric_kind = "DELTA"
    value_type  = "INT64"
    unit        = "1"

    dynamic "labels" {
      for_each = each.value.labels
      content {
        key        = labels.key
        value_type = "STRING"
      }
    }
  }
  label_extractors = each.value.labels

  depends_on = [google_project_service.apis]
}

# The three alerts (google_monitoring_alert_policy.outbox_stale,
# .watchdog_restarts, .provider_errors), which the dashboard below shows,
# read the functions' OpenTelemetry metrics: telemetry.tf.

# Pool events that failed every delivery to kubernetesSubstrates-poolEvents
# wait on the dead-letter subscription: their pools' substrates do not
# follow the pools until they are replayed.
resource "google_monitoring_alert_policy" "pool_events_dead_letters" {
  display_name          = "${var.prefix}: pool events dead-lettered"
  combiner              = "OR"
  notification_channels = var.alert_notification_channels
  severity              = "ERROR"

  conditions {
    display_name = "Messages on the pool events' dead-letter subscription"
    condition_threshold {
      filter          = "metric.type=\"pubsub.googleapis.com/subscription/num_undelivered_messages\" AND resource.type=\"pubsub_subscription\" AND resource.label.subscription_id=\"${google_pubsub_subscription.pool_events_dead_letter.name}\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"
      aggregations {
        alignment_period   = "300s"
        per_series_aligner = "ALIGN_MAX"
      }
      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "86400s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Pool events failed every delivery to kubernetesSubstrates-poolEvents (it acknowledges what it can never apply, so these met a transient failure each time: Firestore or Cloud Tasks unavailable, the service down). Runbook: read them with `gcloud pubsub subscriptions pull ${google_pubsub_subscription.pool_events_dead_letter.name} --limit 10` (without --auto-ack), find the cause in the function's logs around their publish time and fix it, then publish each one again, data and attributes unchanged, to its topic (the consumer ignores versions it already applied), and acknowledge it."
  }

  depends_on = [google_project_service.apis]
}

locals {
  # The dashboard's charts, two per row after the alerts' row.
  charts = [
    { title = "Old outbox events found by the watchdog", metric = format(local.user_metric, google_logging_metric.functions["outbox_drains"].name), group = [] },
    { title = "Failed event publishes (events wait in the outbox)", metric = format(local.user_metric, google_logging_metric.functions["outbox_publish_failures"].name), group = [] },
    { title = "Chains restarted by the watchdog, by kind", metric = format(local.user_metric, google_logging_metric.functions["chain_restarts"].name), group = ["metric.label.kind"] },
    { title = "Failed reconcile runs (retried by Cloud Tasks)", metric = format(local.user_metric, google_logging_metric.functions["reconcile_failures"].name), group = [] },
    { title = "GKE errors, by call", metric = format(local.user_metric, google_logging_metric.functions["provider_errors"].name), group = ["metric.label.call"] },
    { title = "GKE refusals (the tenant's), by call", metric = format(local.user_metric, google_logging_metric.functions["provider_refusals"].name), group = ["metric.label.call"] },
    { title = "Requests by service and response class", metric = "run.googleapis.com/request_count", group = ["resource.label.service_name", "metric.label.response_code_class"] },
    { title = "Reconcile tasks waiting, by queue of changes", metric = "cloudtasks.googleapis.com/queue/depth", group = ["resource.label.queue_id"] },
    { title = "Pool events dropped by the substrates' consumer, by type", metric = format(local.user_metric, google_logging_metric.functions["pool_events_dropped"].name), group = ["metric.label.type"] },
  ]

  alert_policies = [
    google_monitoring_alert_policy.outbox_stale,
    google_monitoring_alert_policy.watchdog_restarts,
    google_monitoring_alert_policy.provider_errors,
    google_monitoring_alert_policy.pool_events_dead_letters,
  ]

  alert_tiles = [
    for i, p in local.alert_policies : {
      xPos   = i * 12
      yPos   = 0
      width  = 12
      height = 12
      widget = { title = p.display_name, alertChart = { name = p.name } }
    }
  ]

  chart_tiles = [
    for i, c in local.charts : {
      xPos   = (i % 2) * 24
      yPos   = 12 + floor(i / 2) * 16
      width  = 24
      height = 16
      widget = {
        title = c.title
        xyChart = {
          dataSets = [{
            plotType = "LINE"
            timeSeriesQuery = {
              timeSeriesFilter = {
                filter = c.metric == "cloudtasks.googleapis.com/queue/depth" ? "metric.type=\"${c.metric}\" AND resource.label.queue_id=one_of(${join(",", [for q in local.change_queues : "\"${google_cloud_tasks_queue.reconcile[q].name}\""])})" : "metric.type=\"${c.metric}\""
                aggregation = {
                  alignmentPeriod    = "60s"
                  perSeriesAligner   = c.metric == "cloudtasks.googleapis.com/queue/depth" ? "ALIGN_MAX" : "ALIGN_SUM"
                  crossSeriesReducer = c.metric == "cloudtasks.googleapis.com/queue/depth" ? "REDUCE_MAX" : "REDUCE_SUM"
                  groupByFields      = c.group
                }
              }
            }
          }]
        }
      }
    }
  ]
}

resource "google_monitoring_dashboard" "operations" {
  dashboard_json = jsonencode({
    displayName  = "${var.prefix}: node pool control plane"
    mosaicLayout = { columns = 48, tiles = concat(local.alert_tiles, local.chart_tiles) }
  })

  depends_on = [google_project_service.apis]
}
