package client

import (
	"context"
	"time"
)

// SetSleep replaces the client's wait between retries.
func SetSleep(c *Client, sleep func(ctx context.Context, d time.Duration) error) { c.sleep = sleep }

// MethodPaths are the paths of every method the client calls.
func MethodPaths() []string {
	out := make([]string, len(methods))
	for i, m := range methods {
		out[i] = m.path()
	}
	return out
}
