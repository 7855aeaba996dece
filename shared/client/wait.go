package client

import (
	"context"
	"fmt"
	"time"
)

// WaitOptions tune the Wait helpers. The zero value (or nil) polls after
// 500 ms, then ever less often up to every 5 s, until ctx ends.
type WaitOptions struct {
	// Interval is the first wait between two polls; each next one is half
	// as long again, up to MaxInterval.
	Interval    time.Duration
	MaxInterval time.Duration
	// OnChange, if set, is called with the first state seen and with
	// every change of state or message after it.
	OnChange func(Observation)
}

// Observation is what a Wait helper saw at one poll.
type Observation struct {
	Elapsed time.Duration // since the wait began
	State   State
	Message string
}

// FailedError is the error of a wait that found its resource in state
// error (unless error was the state waited for): the resource failed,
// and Message says why (the provider's message).
type FailedError struct {
	Kind    string // "cluster", "node pool" or "substrate"
	ID      string
	Name    string
	Message string
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("%s %s (%s) is in state error: %s", e.Kind, e.Name, e.ID, e.Message)
}

// WaitCluster polls the cluster until it is in state target and returns
// it. It returns a *FailedError when the cluster is in state error, and the
// context's error when ctx ends first. Waiting for StateDeleted ends when
// the API no longer finds the cluster; the cluster returned is the last
// one seen, in state deleted.
func (c *Client) WaitCluster(ctx context.Context, tenantID, clusterID string, target State, opts *WaitOptions) (*Cluster, error) {
	var last *Cluster
	err := wait(ctx, opts, target, func(ctx context.Context) (State, string, error) {
		cl, err := c.GetCluster(ctx, tenantID, clusterID)
		if err != nil {
			if IsCode(err, CodeNotFound) && target == StateDeleted && last != nil {
				last.State, last.Message = StateDeleted, ""
				return StateDeleted, "", nil
			}
			return "", "", err
		}
		last = cl
		if cl.State == StateError && target != StateError {
			return cl.State, cl.Message, &FailedError{Kind: "cluster", ID: cl.ID, Name: cl.Name, Message: cl.Message}
		}
		return cl.State, cl.Message, nil
	})
	if err != nil {
		return last, err
	}
	return last, nil
}

// WaitNodePool polls the node pool (through kubernetesNodePools.list)
// until it is in state target and returns it, as WaitCluster does. A pool
// gone from the list is deleted.
func (c *Client) WaitNodePool(ctx context.Context, tenantID, clusterID, nodePoolID string, target State, opts *WaitOptions) (*NodePool, error) {
	var last *NodePool
	err := wait(ctx, opts, target, func(ctx context.Context) (State, string, error) {
		pools, err := c.ListNodePools(ctx, tenantID, clusterID)
		if err != nil {
			if IsCode(err, CodeNotFound) && target == StateDeleted && last != nil {
				last.State, last.Message = StateDeleted, ""
				return StateDeleted, "", nil
			}
			return "", "", err
		}
		for i := range pools {
			if p := &pools[i]; p.ID == nodePoolID {
				last = p
				if p.State == StateError && target != StateError {
					return p.State, p.Message, &FailedError{Kind: "node pool", ID: p.ID, Name: p.Name, Message: p.Message}
				}
				return p.State, p.Message, nil
			}
		}
		if target == StateDeleted && last != nil {
			last.State, last.Message = StateDeleted, ""
			return StateDeleted, "", nil
		}
		return "", "", &Error{StatusCode: 404, Code: CodeNotFound, Message: fmt.Sprintf("node pool %s is not in the list of cluster %s", nodePoolID, clusterID)}
	})
	return last, err
}

// wait polls until poll reports target, an error, or ctx ends.
func wait(ctx context.Context, opts *WaitOptions, target State, poll func(context.Context) (State, string, error)) error {
	var o WaitOptions
	if opts != nil {
		o = *opts
	}
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.MaxInterval < o.Interval {
		o.MaxInterval = max(5*time.Second, o.Interval)
	}
	start := time.Now()
	interval := o.Interval
	var seen bool
	var lastState State
	var lastMsg string
	for {
		st, msg, err := poll(ctx)
		if st != "" && o.OnChange != nil && (!seen || st != lastState || msg != lastMsg) {
			o.OnChange(Observation{Elapsed: time.Since(start), State: st, Message: msg})
		}
		if st != "" {
			seen, lastState, lastMsg = true, st, msg
		}
		if err != nil {
			return err
		}
		if st == target {
			return nil
		}
		if err := sleepCtx(ctx, interval); err != nil {
			return fmt.Errorf("waiting for state %s (last %s): %w", target, lastState, err)
		}
		interval = min(interval*3/2, o.MaxInterval)
	}
}

// WaitSubstrate polls the substrate until it is in state target and
// returns it, as WaitCluster does. A substrate is only made by its pool's
// events, so this is how a caller follows one after publishing them.
func (c *Client) WaitSubstrate(ctx context.Context, tenantID, substrateID string, target State, opts *WaitOptions) (*Substrate, error) {
	var last *Substrate
	err := wait(ctx, opts, target, func(ctx context.Context) (State, string, error) {
		s, err := c.GetSubstrate(ctx, tenantID, substrateID)
		if err != nil {
			if IsCode(err, CodeNotFound) && target == StateDeleted && last != nil {
				last.State, last.Message = StateDeleted, ""
				return StateDeleted, "", nil
			}
			return "", "", err
		}
		last = s
		if s.State == StateError && target != StateError {
			return s.State, s.Message, &FailedError{Kind: "substrate", ID: s.ID, Name: s.PoolID, Message: s.Message}
		}
		return s.State, s.Message, nil
	})
	if err != nil {
		return last, err
	}
	return last, nil
}
