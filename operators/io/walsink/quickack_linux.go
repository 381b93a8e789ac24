package walsink

import (
	"crypto/tls"
	"net"
	"syscall"
)

// ackPromptly returns a function the reader calls after each read from
// conn: it asks Linux to acknowledge what arrived at once (TCP_QUICKACK,
// which the kernel clears again by itself) instead of delaying the ACK.
// mosquitto writes each PUBREC and PUBCOMP with Nagle's algorithm on (its
// default, set_tcp_nodelay false): after the first answer of a window the
// rest wait in its socket for that ACK. The publisher holds a window's
// records for its answers so that one fsync takes them all (group commit),
// so a delayed ACK would hold the answers back for the delayed-ACK timer
// instead.
func ackPromptly(conn net.Conn) func() {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	tcp, ok := conn.(*net.TCPConn)
	if !ok {
		return func() {}
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return func() {}
	}
	set := func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1) }
	return func() { _ = raw.Control(set) }
}
