//go:build !linux

package kubesim

import (
	"os/exec"
	"syscall"
)

// setGroup puts cmd in a process group of its own, which killGroup
// kills whole (go build's compilers and linker with it). Unlike on Linux,
// a process left behind by a killed test goes on running.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
