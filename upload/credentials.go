package upload

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// credentialSource is where resolveCredentials looks: the environment and
// the home directory. Tests replace both.
type credentialSource struct {
	getenv func(string) string
	home   string // "" when unknown: no default credentials file
}

func osCredentialSource() credentialSource {
	home, _ := os.UserHomeDir()
	return credentialSource{getenv: os.Getenv, home: home}
}

// resolveCredentials returns o's static keys when o.AccessKey is set, or
// else the first complete key pair of the standard chain, in this order:
//
//  1. AWS_ACCESS_KEY_ID (or AWS_ACCESS_KEY), AWS_SECRET_ACCESS_KEY (or
//     AWS_SECRET_KEY) and AWS_SESSION_TOKEN;
//  2. MINIO_ROOT_USER (or MINIO_ACCESS_KEY) and MINIO_ROOT_PASSWORD (or
//     MINIO_SECRET_KEY);
//  3. the shared credentials file, AWS_SHARED_CREDENTIALS_FILE or
//     ~/.aws/credentials, profile AWS_PROFILE or "default"
//     (aws_access_key_id, aws_secret_access_key, aws_session_token).
//
// A source with only half a pair is skipped, and an unreadable file is
// skipped like a missing one. With nothing found the credentials are
// anonymous (requests go unsigned). IAM instance roles (EC2/ECS metadata,
// web identity) are not supported: edge devices do not run in AWS.
// Credentials are resolved once, when the Client is made.
func resolveCredentials(o Options, src credentialSource) credentials {
	if o.AccessKey != "" {
		return credentials{AccessKey: o.AccessKey, SecretKey: o.SecretKey, SessionToken: o.SessionToken}
	}
	first := func(names ...string) string {
		for _, n := range names {
			if v := src.getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	if cr := (credentials{
		AccessKey:    first("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY"),
		SecretKey:    first("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY"),
		SessionToken: first("AWS_SESSION_TOKEN"),
	}); cr.complete() {
		return cr
	}
	if cr := (credentials{
		AccessKey: first("MINIO_ROOT_USER", "MINIO_ACCESS_KEY"),
		SecretKey: first("MINIO_ROOT_PASSWORD", "MINIO_SECRET_KEY"),
	}); cr.complete() {
		return cr
	}
	file := src.getenv("AWS_SHARED_CREDENTIALS_FILE")
	if file == "" && src.home != "" {
		file = filepath.Join(src.home, ".aws", "credentials")
	}
	profile := src.getenv("AWS_PROFILE")
	if profile == "" {
		profile = "default"
	}
	if file != "" {
		if cr, err := readCredentialsFile(file, profile); err == nil && cr.complete() {
			return cr
		}
	}
	return credentials{}
}

func (cr credentials) complete() bool { return cr.AccessKey != "" && cr.SecretKey != "" }

// readCredentialsFile reads profile from an AWS shared credentials file: INI
// sections "[profile]" of "key = value" lines, "#" and ";" starting
// comments. Unknown keys are ignored.
func readCredentialsFile(path, profile string) (credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return credentials{}, err
	}
	defer f.Close()
	var cr credentials
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case line[0] == '[' && line[len(line)-1] == ']':
			in = strings.TrimSpace(line[1:len(line)-1]) == profile
			continue
		case !in:
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "aws_access_key_id":
			cr.AccessKey = v
		case "aws_secret_access_key":
			cr.SecretKey = v
		case "aws_session_token":
			cr.SessionToken = v
		}
	}
	return cr, sc.Err()
}
