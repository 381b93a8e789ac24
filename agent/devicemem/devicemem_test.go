package devicemem

import (
	"io/fs"
	"testing"
)

func TestTotal(t *testing.T) {
	const meminfo = "MemTotal:        1000000 kB\nMemFree:          500000 kB\n"
	tests := []struct {
		name  string
		files map[string]string
		want  int64
		known bool
	}{
		{"RAM only", map[string]string{"/proc/meminfo": meminfo}, 1000000 << 10, true},
		{"cgroup v2 limit below RAM", map[string]string{
			"/proc/meminfo":     meminfo,
			"/proc/self/cgroup": "0::/system.slice/eddy.service\n",
			"/sys/fs/cgroup/system.slice/eddy.service/memory.max": "268435456\n",
		}, 256 << 20, true},
		{"cgroup v2 without limit", map[string]string{
			"/proc/meminfo":             meminfo,
			"/proc/self/cgroup":         "0::/\n",
			"/sys/fs/cgroup/memory.max": "max\n",
		}, 1000000 << 10, true},
		{"cgroup v2 limit above RAM", map[string]string{
			"/proc/meminfo":             meminfo,
			"/proc/self/cgroup":         "0::/\n",
			"/sys/fs/cgroup/memory.max": "4294967296\n",
		}, 1000000 << 10, true},
		{"container: the namespace root's file", map[string]string{
			"/proc/meminfo":             meminfo,
			"/proc/self/cgroup":         "0::/\n",
			"/sys/fs/cgroup/memory.max": "134217728\n",
		}, 128 << 20, true},
		{"cgroup v1 limit", map[string]string{
			"/proc/meminfo":     meminfo,
			"/proc/self/cgroup": "12:cpu,cpuacct:/x\n4:memory:/docker/abc\n",
			"/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "67108864\n",
		}, 64 << 20, true},
		{"cgroup v1 unlimited", map[string]string{
			"/proc/meminfo":     meminfo,
			"/proc/self/cgroup": "4:memory:/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 1000000 << 10, true},
		{"nothing readable", map[string]string{}, 0, false},
		{"malformed meminfo", map[string]string{"/proc/meminfo": "MemTotal: lots\n"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := func(p string) ([]byte, error) {
				if s, ok := tt.files[p]; ok {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			}
			got, known := total(read)
			if got != tt.want || known != tt.known {
				t.Fatalf("total = %d, %v; want %d, %v", got, known, tt.want, tt.known)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	tests := []struct {
		total      int64
		known      bool
		goLimit    int64
		stateCache int64
	}{
		{512 << 20, true, 128 << 20, 16 << 20}, // Raspberry Pi Zero
		{1 << 30, true, 256 << 20, 32 << 20},   // Pi 3
		{8 << 30, true, 256 << 20, 32 << 20},   // Pi 5
		{64 << 20, true, 16 << 20, 4 << 20},    // a tight cgroup
		{0, false, 256 << 20, 32 << 20},        // unknown
	}
	for _, tt := range tests {
		if got := DefaultGoLimit(tt.total, tt.known); got != tt.goLimit {
			t.Errorf("DefaultGoLimit(%d, %v) = %d, want %d", tt.total, tt.known, got, tt.goLimit)
		}
		if got := DefaultStateCache(tt.goLimit); got != tt.stateCache {
			t.Errorf("DefaultStateCache(%d) = %d, want %d", tt.goLimit, got, tt.stateCache)
		}
	}
}

// On the machine running the tests: a plausible figure, or an honest false.
func TestTotal_ThisMachine(t *testing.T) {
	if n, known := Total(); known && n < 16<<20 {
		t.Fatalf("Total() = %d: less than 16 MiB", n)
	}
}
