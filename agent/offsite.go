package agent

import (
	"github.com/eddy-edge/eddy/agent/identity"
	"github.com/eddy-edge/eddy/agent/offsite"
	"github.com/eddy-edge/eddy/config"
)

// uploadTarget is the S3 location of cfg's upload block, with bucket and
// prefix optionally overridden (restore --from s3://…). Without a prefix
// it is the upload block's for the device id data_dir records, as the
// agent runs under (read only: a mismatch is for `eddy run` to report).
func uploadTarget(cfg *config.Config, bucket, prefix string) (offsite.Target, error) {
	if cfg.Upload != nil && prefix == "" {
		c := *cfg
		if err := identity.SettleDeviceID(&c, false, false); err != nil {
			return offsite.Target{}, err
		}
		prefix = config.Expand(cfg.Upload.Prefix, map[string]string{"device_id": c.Agent.DeviceID})
	}
	return offsite.Target{Upload: cfg.Upload, DeviceID: cfg.Agent.DeviceID, Bucket: bucket, Prefix: prefix}, nil
}
