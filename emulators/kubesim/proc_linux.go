package kubesim

import (
	"os/exec"
	"syscall"
)

// setGroup puts cmd in a process group of its own, which killGroup
// kills whole (go build's compilers and linker with it), and kills cmd
// when the process that started it dies, so that a killed test leaves no
// API server behind.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
