//go:build unix

package stalltest

import "syscall"

// setRcvBuf sets the socket receive buffer of fd to n bytes.
func setRcvBuf(fd uintptr, n int) error {
	return syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
}
