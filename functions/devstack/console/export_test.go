package console

import "runtime"

// Flush waits until the events published so far are kept.
func (c *Console) Flush() {
	for {
		c.ev.qmu.Lock()
		queued := c.ev.queued
		c.ev.qmu.Unlock()
		if c.ev.kept.Load() >= queued {
			return
		}
		runtime.Gosched()
	}
}

// HoldEvents holds the lock of the events' history until the returned
// func is called.
func (c *Console) HoldEvents() (release func()) {
	c.ev.mu.Lock()
	return c.ev.mu.Unlock
}
