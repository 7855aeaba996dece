// Package seed holds the devstack's default seed (devstack.json), built
// into the devstack so that it starts with it from any directory.
package seed

import _ "embed"

// DevStack is devstack.json: accounts, pools and role bindings.
//
//go:embed devstack.json
var DevStack []byte
