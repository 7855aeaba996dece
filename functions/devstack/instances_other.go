//go:build !linux

package devstack

import "syscall"

// instanceAttrs put an instance in a process group of its own, so that
// a terminal's Ctrl-C reaches the devstack alone, which then stops the
// instances in turn. Unlike on Linux, an instance of a killed devstack
// goes on running.
func instanceAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
