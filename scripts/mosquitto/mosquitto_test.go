package mosquitto

import (
	"net"
	"testing"
)

func TestBroker_StartRestart(t *testing.T) {
	b := Start(t)
	dial := func() {
		t.Helper()
		c, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatalf("dial %s: %v", b.Addr(), err)
		}
		c.Close()
	}
	dial()
	b.Restart()
	dial()
	b.Stop()
	if c, err := net.Dial("tcp", b.Addr()); err == nil {
		c.Close()
		t.Fatal("broker still listening after Stop")
	}
}
