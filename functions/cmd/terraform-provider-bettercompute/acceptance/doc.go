// Package acceptance holds the provider's acceptance test: the real
// OpenTofu (built from the Go module proxy by scripts/tofu.sh, once per
// machine) applying, planning, importing and destroying node pools as
// code against the devstack, with the provider served from the test's
// own process (TF_REATTACH_PROVIDERS), so that the race detector and the
// test's logs cover it. It has no code outside its test.
package acceptance
