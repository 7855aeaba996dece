// Package lifecycle holds the rules of the clusters', node pools' and
// substrates' lifecycle as pure functions over the stored documents
// (shared/model): what a tenant's call does to a pool and to its cluster,
// what the reconciler's findings do, which events follow (event.Event
// values, which the outbox relays), what an event of the pools module
// does, who may use an account, adopt a cluster or own a pool ID.
//
// Every stored object has a spec and a status, as Kubernetes objects do
// (model's package comment says who writes which). The rules here are the
// only code that moves a state: the store applies the ones a transaction
// needs through its Rules, which Rules implements, so that a decision and
// the write it makes see the same documents, and the store knows no rule.
//
// The two files cluster.go and nodepool.go hold every rule of each
// object; waiting.go holds what a change waiting says in both objects'
// messages; drift.go what a pool changed at the provider shows while it
// is brought back (or cannot be); poolevent.go what an event of a pool
// does to its pool's records and its substrates' specs and generations;
// clustercreate.go what a cluster create is checked against; account.go
// which accounts a tenant may use; adoption.go who adopts a cluster;
// rules.go the decisions the store applies.
package lifecycle
