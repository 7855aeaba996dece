variable "project" {
  description = "The tenant's project, where Better Compute creates the account's clusters."
  type        = string
}

variable "reconciler_service_account" {
  description = "The email of Better Compute's reconciler service account (Better Compute gives it, for example reconciler@bc-prod.iam.gserviceaccount.com): the one identity allowed to act as the provisioner."
  type        = string
}

variable "provisioner_account_id" {
  description = "The provisioner service account's ID: its email is <id>@<project>.iam.gserviceaccount.com."
  type        = string
  default     = "bc-provisioner"
}

variable "nodes_account_id" {
  description = "The nodes' service account's ID."
  type        = string
  default     = "bc-nodes"
}

variable "role_id" {
  description = "The ID of the provisioner's custom role in the project."
  type        = string
  default     = "betterComputeProvisioner"
}
