//go:build !linux

package walsink

import "net"

// ackPromptly is a no-op where TCP_QUICKACK does not exist; see the Linux
// version.
func ackPromptly(net.Conn) func() { return func() {} }
