package devstack

import "syscall"

// instanceAttrs put an instance in a process group of its own, so that
// a terminal's Ctrl-C reaches the devstack alone, which then stops the
// instances in turn, and kill it when the devstack dies, so that a killed
// devstack leaves none behind.
func instanceAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
