package upload

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolveCredentials_Chain(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".aws"), 0o700); err != nil {
		t.Fatal(err)
	}
	file := "# comment\n[other]\naws_access_key_id = OTHER\naws_secret_access_key = othersecret\n\n" +
		"[default]\n aws_access_key_id=DEF\n; comment\naws_secret_access_key = defsecret \naws_session_token = deftoken\n"
	if err := os.WriteFile(filepath.Join(home, ".aws", "credentials"), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	alt := filepath.Join(t.TempDir(), "alt")
	if err := os.WriteFile(alt, []byte("[default]\naws_access_key_id=ALT\naws_secret_access_key=altsecret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		opts Options
		env  map[string]string
		home string
		want credentials
	}{
		{"static wins", Options{AccessKey: "AK", SecretKey: "SK", SessionToken: "T"},
			map[string]string{"AWS_ACCESS_KEY_ID": "E", "AWS_SECRET_ACCESS_KEY": "ES"}, home,
			credentials{"AK", "SK", "T"}},
		{"aws env", Options{}, map[string]string{"AWS_ACCESS_KEY_ID": "E", "AWS_SECRET_ACCESS_KEY": "ES", "AWS_SESSION_TOKEN": "ET"}, home,
			credentials{"E", "ES", "ET"}},
		{"aws env old names", Options{}, map[string]string{"AWS_ACCESS_KEY": "E", "AWS_SECRET_KEY": "ES"}, home,
			credentials{"E", "ES", ""}},
		{"half aws env skipped for minio env", Options{},
			map[string]string{"AWS_ACCESS_KEY_ID": "E", "MINIO_ACCESS_KEY": "M", "MINIO_SECRET_KEY": "MS"}, home,
			credentials{"M", "MS", ""}},
		{"minio root user", Options{}, map[string]string{"MINIO_ROOT_USER": "R", "MINIO_ROOT_PASSWORD": "RP"}, home,
			credentials{"R", "RP", ""}},
		{"file default profile", Options{}, nil, home, credentials{"DEF", "defsecret", "deftoken"}},
		{"file AWS_PROFILE", Options{}, map[string]string{"AWS_PROFILE": "other"}, home, credentials{"OTHER", "othersecret", ""}},
		{"AWS_SHARED_CREDENTIALS_FILE", Options{}, map[string]string{"AWS_SHARED_CREDENTIALS_FILE": alt}, home, credentials{"ALT", "altsecret", ""}},
		{"missing profile: anonymous", Options{}, map[string]string{"AWS_PROFILE": "nope"}, home, credentials{}},
		{"nothing: anonymous", Options{}, nil, "", credentials{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := credentialSource{getenv: func(k string) string { return tc.env[k] }, home: tc.home}
			if got := resolveCredentials(tc.opts, src); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
