package config

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Agent is the agent block: the device's identity and process settings.
type Agent struct {
	// DeviceID names this device in client ids, topics, output ids and S3
	// prefixes. Default: derived from /etc/machine-id (MachineDeviceID),
	// else the host name (see Loader).
	DeviceID string
	// DeviceIDDefaulted: DeviceID is the default, not set in the file.
	DeviceIDDefaulted bool
	// DataDir holds state, logs and checkpoints. Default "./eddy-data".
	DataDir string
	// Admin is the admin HTTP listen address; "" disables it. Default
	// "127.0.0.1:8787". Beyond loopback AdminToken is required.
	Admin      string
	AdminToken string
	// AdminHosts are host names, besides the listen address, localhost and
	// IP literals, that requests may carry in their Host header (the
	// names a browser reaches the device by).
	AdminHosts []string
	// AdminTLS, when set, serves the admin endpoint over HTTPS.
	AdminTLS *AdminTLS
	// LogLevel is "debug", "info" (default), "warn" or "error".
	LogLevel string
	// LogFormat is "text" (default) or "json".
	LogFormat string
	// MaxKeyGroups is fixed for the life of the state. Default 128.
	MaxKeyGroups int
	// Parallelism is the default number of keyed subtasks. Default 1.
	Parallelism int
	// MemoryLimit is the Go runtime's soft memory limit in bytes; 0 (the
	// default) means derived from the device at start: a quarter of its
	// RAM or cgroup limit, at most 256 MiB (devicemem.DefaultGoLimit).
	MemoryLimit int64
	// MaxDiskBytes bounds what Eddy keeps on disk: ingest logs, WALs,
	// checkpoints, state and file sinks' output. 0 (the default) means the
	// agent derives it at start from data_dir's file system.
	// When set, the components' own bounds (DiskShares) must fit in it.
	MaxDiskBytes int64
	DeclRange    hcl.Range

	maxDiskRange hcl.Range // the value of max_disk, where a budget overrun is reported
}

// maxKeyGroupsLimit is Flink's upper bound on key groups.
const maxKeyGroupsLimit = 1 << 15

func (d *decoder) decodeAgent(b *hcl.Block, deviceID func() (string, error)) Agent {
	ag := Agent{DataDir: "./eddy-data", Admin: "127.0.0.1:8787", LogLevel: "info", LogFormat: "text", MaxKeyGroups: 128, Parallelism: 1}
	var a attrs
	if b != nil {
		var c *hcl.BodyContent
		a, c = d.content(b, []string{"device_id", "data_dir", "admin", "admin_token", "admin_hosts", "log_level", "log_format", "max_key_groups", "parallelism", "memory_limit", "max_disk"}, adminTLSBlock)
		ag.DeclRange = b.DefRange
		ag.DeviceID = a.str("device_id", noVars, "")
		ag.DataDir = a.str("data_dir", noVars, ag.DataDir)
		ag.Admin = a.str("admin", noVars, ag.Admin)
		ag.AdminToken = a.str("admin_token", noVars, "")
		ag.AdminHosts, _, _ = a.strList("admin_hosts", noVars)
		ag.AdminTLS = d.decodeAdminTLS(c.Blocks)
		ag.LogLevel = a.enum("log_level", []string{"debug", "info", "warn", "error"}, ag.LogLevel)
		ag.LogFormat = a.enum("log_format", []string{"text", "json"}, ag.LogFormat)
		ag.MaxKeyGroups = int(a.integer("max_key_groups", 128, 1, maxKeyGroupsLimit))
		ag.Parallelism = int(a.integer("parallelism", 1, 1, int64(ag.MaxKeyGroups)))
		ag.MemoryLimit = a.size("memory_limit", 0)
		if a.has("memory_limit") && ag.MemoryLimit < 16<<20 {
			d.errorf(a.rangeOf("memory_limit"), "Value out of range", "\"memory_limit\" must be at least 16MiB; leave it out to size it to the device.")
		}
		if a.has("max_disk") {
			// -1 comes back only when the value was wrong (reported).
			ag.MaxDiskBytes, ag.maxDiskRange = a.size("max_disk", -1), a.rangeOf("max_disk")
			if ag.MaxDiskBytes >= 0 && ag.MaxDiskBytes < 1<<20 {
				d.errorf(ag.maxDiskRange, "Value out of range", "\"max_disk\" must be at least 1MiB; leave it out to take a share of data_dir's file system.")
			}
			ag.MaxDiskBytes = max(ag.MaxDiskBytes, 0)
		}
	}
	where := func(name string) hcl.Range {
		if b == nil {
			return hcl.Range{}
		}
		return a.rangeOf(name)
	}
	if b == nil || !a.has("device_id") {
		id, err := deviceID()
		id = strings.TrimSpace(id)
		if err != nil || id == "" {
			d.errorf(where("device_id"), "Cannot determine the device id",
				"Neither /etc/machine-id nor the host name gave a device id; set device_id in the agent block.")
		}
		ag.DeviceID, ag.DeviceIDDefaulted = id, true
	}
	if ag.DeviceID != "" && strings.ContainsAny(ag.DeviceID, "/+#${} \t\r\n") {
		d.errorf(where("device_id"), "Invalid device id",
			"The device id %q goes into MQTT topics and S3 prefixes, so it cannot contain \"/\", \"+\", \"#\", \"$\", braces or spaces.", ag.DeviceID)
	}
	if ag.DataDir == "" {
		d.errorf(where("data_dir"), "Invalid value", "\"data_dir\" cannot be empty; the default is \"./eddy-data\".")
	}
	if ag.Admin != "" {
		if err := validateListen(ag.Admin); err != nil {
			d.errorf(where("admin"), "Invalid address", "%q is not a host:port listen address, e.g. \"127.0.0.1:8787\".", ag.Admin)
		} else if lo, _ := isLoopback(ag.Admin); !lo && ag.AdminToken == "" {
			d.errorf(where("admin"), "Admin endpoint needs a token",
				"%q is reachable beyond this device; set admin_token (e.g. admin_token = env(\"EDDY_ADMIN_TOKEN\")) or listen on 127.0.0.1.", ag.Admin)
		}
	}
	return ag
}
