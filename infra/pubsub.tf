# One topic per event type (CloudEvents type as the topic name). The relay
# publishes with the cluster ID as ordering key, so a subscriber that wants
# a cluster's events in order creates its subscription with
# enable_message_ordering = true; ordering is a subscription setting and
# costs nothing on the topic. Delivery is at least once: subscribers
# deduplicate by the CloudEvent id (the message attribute ce-id).
resource "google_pubsub_topic" "events" {
  for_each = toset(local.event_types)
  name     = each.value

  # Lets a subscriber created late, or one that fell behind, seek back.
  message_retention_duration = "604800s"

  depends_on = [google_project_service.apis]
}

# The pools module's events (API.md §9). The pools module publishes them,
# so it owns their topics: their retention, who may publish, and their
# lifetime are its to decide, and a `terraform destroy` of this project
# must not delete another module's topics (nor two deployments fight over
# them). This project reads them as data sources, which also makes a plan
# fail, clearly, before the pools module is deployed; it owns only its
# subscriptions.
data "google_pubsub_topic" "pool_events" {
  for_each = toset(local.pool_event_types)
  project  = local.pool_events_project
  name     = each.value
}

# One push subscription per topic to kubernetesSubstrates-poolEvents, which
# the Functions Framework receives as a CloudEvent (the topic in the
# path sets its source). Delivery is at least once and in no order: the
# function applies an event only when its version is above the pool's last,
# and acknowledges what it can never apply (a malformed event), so a retry
# is only ever of a transient failure.
resource "google_pubsub_subscription" "pool_events" {
  for_each = data.google_pubsub_topic.pool_events
  name     = "${var.prefix}-pool-events-${replace(each.key, ".", "-")}"
  topic    = each.value.id

  ack_deadline_seconds = 60
  # A consumer down for days catches up: the events wait a week.
  message_retention_duration = "604800s"

  # Pool events may be months apart: the subscription must not expire
  # while idle (the default is 31 days).
  expiration_policy {
    ttl = ""
  }

  push_config {
    push_endpoint = "${local.pool_events_url}/projects/${local.pool_events_project}/topics/${each.key}"
    # Cloud Run checks the token: its audience is the service's URL, and
    # its account may invoke the service and nothing else.
    oidc_token {
      service_account_email = google_service_account.pool_events_push.email
      audience              = local.pool_events_url
    }
  }

  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }

  # An event that keeps failing goes aside, kept for inspection and
  # replay, instead of being retried for the whole retention.
  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.pool_events_dead_letter.id
    max_delivery_attempts = var.pool_events_max_delivery_attempts
  }

  depends_on = [
    google_cloud_run_v2_service_iam_member.push_invokes_pool_events,
    google_pubsub_topic_iam_member.pubsub_agent_dead_letters,
  ]
}

# The pool events that failed every delivery, and the subscription that
# keeps them (a topic without one drops what it is sent). An operator reads
# them with gcloud pubsub subscriptions pull, and replays one by publishing
# it again to its topic.
resource "google_pubsub_topic" "pool_events_dead_letter" {
  name                       = "${var.prefix}-pool-events-dead-letter"
  message_retention_duration = "604800s"

  depends_on = [google_project_service.apis]
}

resource "google_pubsub_subscription" "pool_events_dead_letter" {
  name                       = "${var.prefix}-pool-events-dead-letter"
  topic                      = google_pubsub_topic.pool_events_dead_letter.id
  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"

  expiration_policy {
    ttl = ""
  }
}
