# What the tenant gives Better Compute for its account: the project, the
# service account to impersonate, and the nodes' account.
output "account" {
  description = "The account's fields: project, impersonate and nodeServiceAccount."
  value = {
    project            = var.project
    impersonate        = google_service_account.provisioner.email
    nodeServiceAccount = google_service_account.nodes.email
  }
}
