package clocksync

import "golang.org/x/sys/unix"

// Kernel is the kernel's view of the system clock: adjtimex(2) with no
// modes (read only, no privilege needed) reports STA_UNSYNC in its status
// until a time daemon (ntpd, chrony, systemd-timesyncd) has disciplined the
// clock, and the kernel sets it again when that discipline lapses.
type Kernel struct{}

// Synchronized reports whether STA_UNSYNC is clear.
func (Kernel) Synchronized() (bool, error) {
	var tx unix.Timex
	if _, err := unix.Adjtimex(&tx); err != nil {
		return false, err
	}
	return tx.Status&unix.STA_UNSYNC == 0, nil
}
