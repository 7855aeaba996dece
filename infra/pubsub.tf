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
